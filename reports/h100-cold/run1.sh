#!/bin/sh
# First call, on the H100's host: test_timing (the cold CPU run's tests);
# the CPU sgemm ceiling; the conv sweep's rows (forward, dx, dw) of the
# stride-1 3x3 layers of the CIFAR stages and 64ch 56x56 at batch 32 by
# DEFAULT (cpu-im2col), hot and cold alternately (hot, cold, cold, hot);
# `bench profile` of the ResNet-18 CIFAR CPU step at batch 32 (the same
# layers' times inside a step); the step hot and cold. Work after 450 s is
# left out. Results under $OUT/cold; the caller tars them.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/cold
mkdir -p $r
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
.gpu/bin/test_timing > $r/test_timing.log 2>&1
echo "test_timing exit $?: $(grep Synthesis $r/test_timing.log) ($(el) s)"
timeout 60 .gpu/bin/bench --sweep ceiling --backends cpu --out $r/ceiling > $r/ceiling.log 2>&1
echo "ceiling exit $?: $(grep -v '^#' $r/ceiling/ceiling.csv | awk -F, '$2 ~ /sgemm/ {print $2, $20}' | tr '\n' ' ')"
grep "host caches" $r/ceiling/ceiling.csv
cases='r18c-l1.0-conv1*,r18c-l2.0-conv2*,r18c-l3.0-conv2*,r18c-l4.0-conv2*,r18i-l1.0-conv1*'
i=0
for mode in hot cold cold hot; do
    i=$((i+1))
    flag=; [ $mode = cold ] && flag=--cold
    timeout 90 .gpu/bin/bench --sweep conv --backends cpu --impl cpu-im2col --case "$cases" --sizes conv=32 \
        --cpu-cap 3 $flag --out $r/conv-$i-$mode > $r/conv-$i-$mode.log 2>&1
    echo "conv $i $mode exit $? ($(el) s): $(grep -v '^#' $r/conv-$i-$mode/conv.csv | awk -F, 'NR > 1 {printf "%.0f ", $20}')"
done
if [ $(el) -lt 420 ]; then
    timeout 60 .gpu/bin/bench profile --model resnet18-cifar --backend cpu --batch 32 --out $r/profile-b32 \
        > $r/profile-b32.log 2>&1
    echo "profile exit $? ($(el) s)"
fi
i=0
for mode in hot cold; do
    i=$((i+1))
    [ $(el) -lt 480 ] || break
    flag=; [ $mode = cold ] && flag=--cold
    timeout 45 .gpu/bin/bench --sweep resnet --backends cpu --impl 'cpu*' --case 'resnet18-cifar' \
        --sizes resnet=32 --cpu-cap 20 --reps 5 $flag --out $r/resnet-$i-$mode > $r/resnet-$i-$mode.log 2>&1
    echo "resnet $i $mode exit $? ($(el) s): $(grep -v '^#' $r/resnet-$i-$mode/resnet.csv | cut -d, -f9,13,16,17 | tail -n +2 | tr '\n' ' ')"
done
echo "GFLOP/s at batch 32 by run (mode status GFLOP/s):"
for f in $r/conv-*/conv.csv; do
    printf '%s: ' $(basename $(dirname $f))
    grep -v '^#' $f | awk -F, 'NR > 1 {printf "%s %s %.0f | ", $2, $27, $20}'
    echo
done
