#!/bin/sh
# Third run, on the H100's host: the ResNet-18 CIFAR CPU step at batch 8 by
# the bench of 806d664 (old) and this one (new), three times each
# alternately with 10 timed steps, then bench profile of the step at batch 8
# by both. Results under $OUT/b8; the caller tars them.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/b8
mkdir -p $r
i=0
for b in old new old new old new; do
    i=$((i+1))
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old806
    timeout 60 $bin --sweep resnet --backends cpu --impl 'cpu*' --case 'resnet18-cifar' --sizes resnet=8 \
        --cpu-cap 20 --reps 10 --out $r/resnet-$i-$b > $r/resnet-$i-$b.log 2>&1
    echo "resnet $i $b exit $?: $(grep -v '^#' $r/resnet-$i-$b/resnet.csv | cut -d, -f9,15,16,17,19,27 | tail -n +2 | tr '\n' ' ')"
done
for b in old new; do
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old806
    timeout 60 $bin profile --model resnet18-cifar --backend cpu --batch 8 --out $r/profile-$b > $r/profile-$b.log 2>&1
    echo "profile $b exit $?: $(grep '^step:' $r/profile-$b.log)"
done
