#!/usr/bin/env python3
"""Writes the seed corpora corpus/<harness>/ (committed; run again only to
change them): small valid files and one of each damage the readers must
name. A real Fashion-MNIST sample is taken from the installed data set when
it is there. Usage: python3 fuzz/make_seeds.py"""
import gzip, os, struct, zlib

HERE = os.path.dirname(os.path.abspath(__file__))
FMNIST = "/usr/share/datasets/fashion-mnist"


def idx(dims, body=None):
    """an IDX file of unsigned bytes; the body 0, 1, 2 ... mod 251 unless given"""
    n = 1
    for d in dims:
        n *= d
    if body is None:
        body = bytes(i % 251 for i in range(n))
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + body


def gz(data):
    return gzip.compress(data, mtime=0)


def put(harness, name, data):
    d = os.path.join(HERE, "corpus", harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def fmnist(kind, count):
    """the first count items of the installed t10k split, as an IDX file"""
    path = os.path.join(FMNIST, "t10k-%s-ubyte.gz" % kind)
    if not os.path.exists(path):
        return None
    raw = gzip.open(path).read()
    ndim = raw[3]
    dims = list(struct.unpack(">%dI" % ndim, raw[4:4 + 4 * ndim]))
    item = 1
    for d in dims[1:]:
        item *= d
    return idx([count] + dims[1:], raw[4 + 4 * ndim:4 + 4 * ndim + count * item])


images = idx([3, 2, 2])
labels = idx([3], bytes([0, 9, 4]))
bad_crc = bytearray(gz(images))
bad_crc[-8] ^= 0x5A

# the IDX reader
put("idx", "images-3x2x2", images)
put("idx", "labels-3", labels)
put("idx", "4d", idx([2, 1, 3, 2]))
put("idx", "images-3x2x2.gz", gz(images))
put("idx", "two-members.gz", gz(images[:16]) + gz(images[16:]))
put("idx", "stored-block.gz", gzip.compress(images, compresslevel=0, mtime=0))
put("idx", "truncated-body", images[:-1])
put("idx", "trailing-byte", images + b"\0")
put("idx", "after-gzip.gz", gz(images) + b"garbage")
put("idx", "bad-crc.gz", bytes(bad_crc))
put("idx", "cut.gz", gz(images)[:-9])
put("idx", "huge-dims", idx([0x7FFFFFFF, 1, 1], b""))
sample = fmnist("images-idx3", 2)
if sample:
    put("idx", "fashion-2-images.gz", gz(sample))


# the data-set loader: flags (bit 0, 1: images, labels named .gz), the
# images file's length (2 bytes, little-endian), the images, the labels
def split(flags, img, lab):
    return bytes([flags]) + struct.pack("<H", len(img)) + img + lab


put("dataset", "plain", split(0, images, labels))
put("dataset", "gzip", split(3, gz(images), gz(labels)))
put("dataset", "gzip-named-plain", split(0, gz(images), labels))
put("dataset", "count-mismatch", split(0, images, idx([4], bytes([1, 2, 3, 4]))))
put("dataset", "label-10", split(0, images, idx([3], bytes([0, 10, 1]))))
put("dataset", "labels-2d", split(0, images, idx([3, 1], bytes([0, 1, 2]))))
lab = fmnist("labels-idx1", 2)
if sample and lab:
    put("dataset", "fashion-2", split(3, gz(sample), gz(lab)))

# the bench CSV reader
HEADER = ("sweep,case,impl,backend,dtype,m,n,k,batch,threads,transfer,tf32,warmup,reps,median_ms,min_ms,"
          "max_ms,cv_pct,gflops,gbps,max_rel_err,status\n")
ROW = "gemm,square,cpu-omp,cpu,f32,64,64,64,1,16,0,0,1,5,0.25,0.2,0.3,4.5,2.1,NaN,1e-07,ok\n"
META = "# duograd bench 0.1.0\n# git commit: 0000000\n"
put("csv", "full", (META + HEADER + ROW + ROW.replace("cpu-omp,cpu", "gpu-cublas,gpu")).encode())
put("csv", "header-only", HEADER.encode())
put("csv", "reordered-extra", (
    "status,impl,note,max_ms,sweep,case,tf32,backend,m,n,k,batch,transfer,min_ms,median_ms,gflops\n"
    "ok,gpu-cublas-tf32,hello,3.5,gemm,square,1,gpu,64,32,16,1,0,1.5,2.5,42\n"
    "oom,cpu-omp,,NaN,gemm,tall,0,cpu,8192,1024,1024,1,1,NaN,NaN,NaN\n").encode())
put("csv", "missing-column", (HEADER.replace("median_ms,", "") + "x\n").encode())
put("csv", "crlf", (META + HEADER + ROW).replace("\n", "\r\n").encode())
put("csv", "partial-last-line", (HEADER + ROW + ROW[:30]).encode())
put("csv", "field-count", (HEADER + "gemm,square\n").encode())
put("csv", "empty-fields", (HEADER + "," * 21 + "\n").encode())
# more rows than the reader's first allocation (256): the one input that grows it
put("csv", "many-rows", ("sweep,case,impl,backend,m,n,k,batch,transfer,median_ms,min_ms,max_ms,status\n"
                         + "g,c,i,b,1,1,1,1,0,1,1,1,ok\n" * 300).encode())
put("csv", "blank-and-comments", ("\n#\n\n" + HEADER + "\n" + ROW).encode())

# CIFAR-10 binary batches: records of a label byte and 3 planes of 32x32
def cifar(labels):
    return b"".join(bytes([lab]) + bytes((i * 7 + lab) % 256 for i in range(3072)) for lab in labels)


put("cifar", "one-record", cifar([3]))
put("cifar", "three-records.gz", gz(cifar([0, 9, 5])))
put("cifar", "label-10", cifar([1, 10]))
put("cifar", "cut-record", cifar([2])[:-1])
put("cifar", "cut.gz", gz(cifar([4, 4]))[:-9])

# the char-LM's text corpus
put("text", "prose", b"It was the best of times,\nit was the worst of times.\n")
put("text", "crlf-tabs", b"a\tb\r\nc\fd\r\n")
put("text", "one-character", b"aaaaaaaa")
put("text", "nul", b"text\0more")
put("text", "controls", b"ab\x01\x02cd")
put("text", "high-bytes", bytes(range(32, 256)))

# profile JSON, as bench profile writes it and bench plot reads it back
NODE = ('{"id": 3, "name": "fc1.matmul", "op": "matmul", "phase": "forward", "shapes": "[16,784]x[784,10]", '
        '"flops": 250880, "bytes": 82560, "median_ms": 0.02, "min_ms": 0.018, "bound": "memory", '
        '"ceiling_frac": 0.1, "live_bytes": 51200}')
PROF = ('{"backend": "%s", "batch": 16, "steps": 3, "step_ms": {"plan": 0.1, "profiled": 0.12, '
        '"sum_of_nodes": 0.11}, "ceilings": {"gflops": 100, "gbps": 10}, "memory_bytes": {"persistent": 1000, '
        '"arena": 4096, "live_peak": 2048}, "nodes": [%s, %s]}')
def profile(model, *backends):
    return ('{"model": "%s", "context": "# duograd", "profiles": [%s]}'
            % (model, ", ".join(PROF % (b, NODE, NODE.replace("forward", "backward")) for b in backends))).encode()


put("profile", "cpu", profile("logreg", "cpu"))
put("profile", "cpu-gpu", profile("mlp", "cpu", "cuda:0"))
put("profile", "model-climbs", profile("a/../../../X", "cpu"))
put("profile", "no-nodes", b'{"model": "m", "profiles": [{"batch": 1}]}')
put("profile", "nan-batch", profile("m", "cpu").replace(b'"batch": 16', b'"batch": 1e300'))
