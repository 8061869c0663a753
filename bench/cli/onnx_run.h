/* onnx_run.h: `bench onnx-run FILE.onnx --input X.f32 --out Y.f32`: an
 * ONNX file's forward on given examples, its output written, so that it
 * can be compared with another runtime's (onnxruntime's, in
 * tests/onnx_models/test_onnxruntime.py). */
#ifndef DG_BENCH_ONNX_RUN_H
#define DG_BENCH_ONNX_RUN_H

/* exit code where the backend asked for is not on this machine (a build
 * without CUDA, no device): a test skips on it */
#define BENCH_ONNX_RUN_NO_BACKEND 4

/* argv[0] = "onnx-run"; the exit code: 0, 1 (a file that cannot be read
 * or run, with the reason on stderr), 2 (usage), BENCH_ONNX_RUN_NO_BACKEND */
int bench_onnx_run_main(int argc, char **argv);

#endif
