#!/bin/sh
# On the H100's host: does keeping the OpenMP team whole in the batch
# strategy (829c25d) remove the ~0.8 ms before every op that follows a
# batch-strategy convolution? `team.sh step`: test_conv; the ResNet-18
# CIFAR CPU step by the bench of 4566bf8 (old) and 829c25d (new)
# alternately, old new new old old new, batches 8 and 32, PyTorch's CPU
# step after each pair (bench/torch_peer.py); bench profile of the step by
# both at batch 8, by the new one at batch 32. `team.sh conv`: the conv
# sweep's CPU rows of the CIFAR layers, batches 8 and 32, and PyTorch's CPU
# convolution of the same rows in the same call (bench/torch_conv_peer.py).
# Results under $OUT/team; the caller tars them.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/team
mkdir -p $r
load() { cut -d' ' -f1-3 /proc/loadavg; }
case $1 in
step)
    .gpu/bin/test_conv --jobs 4 > $r/test_conv.log 2>&1
    echo "test_conv exit $?: $(grep Synthesis $r/test_conv.log)"
    i=0
    for b in old new new old old new; do
        i=$((i+1))
        bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old
        l=$(load)
        timeout 80 $bin --sweep resnet --backends cpu --impl 'cpu*' --case 'resnet18-cifar' --sizes resnet=8,32 \
            --cpu-cap 20 --reps 10 --out $r/resnet-$i-$b > $r/resnet-$i-$b.log 2>&1
        echo "resnet $i $b exit $? (load $l): $(grep -v '^#' $r/resnet-$i-$b/resnet.csv | cut -d, -f3,9,16,27 | tail -n +2 | tr '\n' ' ')"
        if [ $((i % 2)) = 0 ]; then
            timeout 100 python3 bench/torch_peer.py --device cpu --out $r/resnet-$i-$b --batches-cifar 8,32 \
                --batches-imagenet 8 > $r/torch-$i.log 2>&1
            echo "torch after $i exit $?: $(grep -v '^#' $r/resnet-$i-$b/resnet.csv | grep torch | cut -d, -f2,9,16,27 | tr '\n' ' ')"
        fi
    done
    for p in old-b8 new-b8 new-b32; do
        bin=.gpu/bin/bench; case $p in old*) bin=.gpu/bin/bench-old ;; esac
        timeout 90 $bin profile --model resnet18-cifar --backend cpu --batch ${p#*-b} --out $r/profile-$p \
            > $r/profile-$p.log 2>&1
        echo "profile $p exit $?: $(grep '^step:' $r/profile-$p.log)"
    done
    ;;
conv)
    l=$(load)
    timeout 300 .gpu/bin/bench --sweep ceiling,conv --backends cpu --impl 'cpu-im2col*' --case 'r18c-*' \
        --sizes conv=8,32 --cpu-cap 3 --out $r/conv > $r/conv.log 2>&1
    echo "conv exit $? (load $l): $(grep -vc '^#' $r/conv/conv.csv) lines"
    timeout 200 python3 bench/torch_conv_peer.py --out $r/conv --devices cpu --filter r18c --batches 8,32 \
        --time-limit 180 > $r/torch-conv.log 2>&1
    echo "torch conv exit $?: $(grep -c torch-cpu $r/conv/conv.csv) rows"
    ;;
*) echo "usage: team.sh step|conv" >&2; exit 2 ;;
esac
