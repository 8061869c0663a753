#!/bin/sh
# gpu_attention16.cu's kernels under the host emulation of their
# primitives (tests/emu_attention16.cpp says what it checks and what it
# cannot), in bf16 and f16: the kernels' index arithmetic checked against
# float64 on any machine, a GPU or none.
#   tests/emu_attention16.sh SOURCE BUILD [CXX]
# SOURCE: the source root; BUILD: a folder for the program; CXX: the C++
# compiler (default c++).
set -e
src=$1
out=$2
cxx=${3:-c++}
"$cxx" -std=c++17 -O2 -Wall -Wextra -Wno-unknown-pragmas -Werror -I"$src" -o "$out/emu_attention16" \
    "$src/tests/emu_attention16.cpp"
"$out/emu_attention16" bf16
"$out/emu_attention16" f16
