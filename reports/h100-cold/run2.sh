#!/bin/sh
# Second call, on the H100's host (run1's cpu-im2col rows were the passes,
# which DEFAULT does not take for these layers): the conv sweep's rows
# (forward, dx, dw) of the stride-1 3x3 layers of the CIFAR stages and
# 64ch 56x56 at batch 32 by the strategies DEFAULT takes there
# (cpu-shift: forward and dx of 64 and 128 channels; cpu-im2col-batch:
# dw of 64 and 128 channels, forward and dx of 256 and 512; cpu-im2col-chan:
# dw of 256 and 512), hot and cold alternately, six rounds; `bench
# profile` of the ResNet-18 CIFAR CPU step at batch 32 twice; the step
# hot and cold alternately, twice each. Work after 500 s is left out.
# Results under $OUT/cold; the caller tars them.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/cold
mkdir -p $r
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
timeout 60 .gpu/bin/bench --sweep ceiling --backends cpu --out $r/ceiling > $r/ceiling.log 2>&1
echo "ceiling exit $?: $(grep -v '^#' $r/ceiling/ceiling.csv | awk -F, '$2 ~ /sgemm/ {print $2, $20}' | tr '\n' ' ')"
cases='r18c-l1.0-conv1*,r18c-l2.0-conv2*,r18c-l3.0-conv2*,r18c-l4.0-conv2*,r18i-l1.0-conv1*'
i=0
for mode in hot cold cold hot hot cold; do
    i=$((i+1))
    [ $(el) -lt 380 ] || break
    flag=; [ $mode = cold ] && flag=--cold
    timeout 120 .gpu/bin/bench --sweep conv --backends cpu --impl 'cpu-shift,cpu-im2col-batch,cpu-im2col-chan' \
        --case "$cases" --sizes conv=32 --cpu-cap 3 $flag --out $r/conv-$i-$mode > $r/conv-$i-$mode.log 2>&1
    echo "conv $i $mode exit $? ($(el) s)"
done
i=0
for mode in hot cold cold hot; do
    i=$((i+1))
    [ $(el) -lt 480 ] || break
    flag=; [ $mode = cold ] && flag=--cold
    timeout 45 .gpu/bin/bench --sweep resnet --backends cpu --impl 'cpu*' --case 'resnet18-cifar' \
        --sizes resnet=32 --cpu-cap 20 --reps 5 $flag --out $r/resnet-$i-$mode > $r/resnet-$i-$mode.log 2>&1
    echo "resnet $i $mode exit $? ($(el) s): $(grep -v '^#' $r/resnet-$i-$mode/resnet.csv | cut -d, -f9,13,16,17 | tail -n +2 | tr '\n' ' ')"
done
for i in 1 2; do
    [ $(el) -lt 520 ] || break
    timeout 40 .gpu/bin/bench profile --model resnet18-cifar --backend cpu --batch 32 --out $r/profile-$i-b32 \
        > $r/profile-$i-b32.log 2>&1
    echo "profile $i exit $? ($(el) s)"
done
echo "GFLOP/s at batch 32 (impl status GFLOP/s), hot runs then cold runs:"
for l in r18c-l1.0-conv1 r18c-l2.0-conv2 r18c-l3.0-conv2 r18c-l4.0-conv2 r18i-l1.0-conv1; do
    for d in fwd bwd-data bwd-weight; do
        for mode in hot cold; do
            printf '%s:%s %s: ' $l $d $mode
            for f in $r/conv-*-$mode/conv.csv; do
                grep -v '^#' $f | awk -F, -v c="$l:$d" '$2 == c && $27 != "skipped" {printf "%s %.0f ", substr($3, 5), $20}'
            done
            echo
        done
    done
done
