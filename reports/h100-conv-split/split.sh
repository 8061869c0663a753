#!/bin/sh
# On the H100's host: the batch strategy's GEMMs alone (split, see split.c)
# for the 3x3 layers of ResNet-18's CIFAR stem at batch 32 on 16 threads
# (2 images a thread), at the block size cpu_conv.c uses and at larger
# ones; the sgemm ceilings, multithreaded and one serial sgemm a core; and
# the conv sweep's cpu-im2col-batch rows of the same layers (unfolding
# included) in the same call. Results under $OUT/split.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/split
mkdir -p $r
s=.gpu/bin/split
{
    $s ceiling 4096; $s percore 1024; $s percore 512
    # 64ch 32x32: R = 576, blocks of 8 rows (256 columns), 4 a image
    for m in fwd dx dw; do $s $m 64 576 256 8; $s $m 64 576 512 4; $s $m 64 576 1024 2; done
    # 128ch 16x16: R = 1152, an image (256 columns) a block
    for m in fwd dx dw; do $s $m 128 1152 256 2; $s $m 128 1152 512 1; done
    # 256ch 8x8: R = 2304, 64 columns an image
    for m in fwd dx dw; do $s $m 256 2304 64 2; $s $m 256 2304 128 1; done
    # 512ch 4x4: R = 4608, 16 columns an image
    for m in fwd dx dw; do $s $m 512 4608 16 2; $s $m 512 4608 32 1; done
    $s ceiling 4096
} > $r/split.log 2>&1
echo "split exit $?"
timeout 120 .gpu/bin/bench --sweep conv --backends cpu --impl 'cpu-im2col*' \
    --case 'r18c-l1.0-conv1*,r18c-l2.0-conv2*,r18c-l3.0-conv2*,r18c-l4.0-conv2*' --sizes conv=32 \
    --cpu-cap 3 --out $r/conv > $r/conv.log 2>&1
echo "conv exit $?"
cat $r/split.log
grep -v '^#' $r/conv/conv.csv | cut -d, -f2,3,16,20,27
