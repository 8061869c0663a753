#!/bin/sh
# resnet CPU step, old (780e5e5) and new bench alternately: old new new old
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/ab
mkdir -p $r
i=0
for b in old new new old; do
    i=$((i+1))
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old780
    timeout 140 $bin --sweep resnet --impl 'cpu*' --case 'resnet18-cifar' --sizes resnet=8,32 --cpu-cap 20 --out $r/$i-$b > $r/$i-$b.log 2>&1
    echo "round $i $b exit $?: $(grep -v '^#' $r/$i-$b/resnet.csv | cut -d, -f2,3,9,16,27 | tr '\n' ' ')"
done
