/* gpu_cudnn_api.cuh: cuDNN's entry points that the backend calls, resolved
 * from libcudnn.so.9 when a plan first asks for cuDNN (gpu_cudnn_load.cu:
 * dg__cudnn_load, which fills dg__cudnn before any call through it). The
 * legacy convolution API: descriptors, the measured search (cudnnFind*), the workspace
 * queries and the three convolutions. Only in a build that found cudnn.h
 * (DG_HAVE_CUDNN). */
#ifndef DG_GPU_CUDNN_API_CUH
#define DG_GPU_CUDNN_API_CUH

#ifdef DG_HAVE_CUDNN
#include <cudnn.h>

struct dg__cudnn_api {
    decltype(&cudnnCreate)                                 create;
    decltype(&cudnnDestroy)                                destroy;
    decltype(&cudnnSetStream)                              set_stream;
    decltype(&cudnnGetErrorString)                         error_string;
    decltype(&cudnnGetVersion)                             get_version;
    decltype(&cudnnCreateTensorDescriptor)                 create_tensor;
    decltype(&cudnnSetTensor4dDescriptor)                  set_tensor_4d;
    decltype(&cudnnDestroyTensorDescriptor)                destroy_tensor;
    decltype(&cudnnCreateFilterDescriptor)                 create_filter;
    decltype(&cudnnSetFilter4dDescriptor)                  set_filter_4d;
    decltype(&cudnnDestroyFilterDescriptor)                destroy_filter;
    decltype(&cudnnCreateConvolutionDescriptor)            create_conv;
    decltype(&cudnnSetConvolution2dDescriptor)             set_conv_2d;
    decltype(&cudnnSetConvolutionGroupCount)               set_group_count;
    decltype(&cudnnSetConvolutionMathType)                 set_math_type;
    decltype(&cudnnDestroyConvolutionDescriptor)           destroy_conv;
    decltype(&cudnnFindConvolutionForwardAlgorithm)       forward_algos;
    decltype(&cudnnFindConvolutionBackwardDataAlgorithm)  backward_data_algos;
    decltype(&cudnnFindConvolutionBackwardFilterAlgorithm) backward_filter_algos;
    decltype(&cudnnGetConvolutionForwardWorkspaceSize)     forward_workspace;
    decltype(&cudnnGetConvolutionBackwardDataWorkspaceSize) backward_data_workspace;
    decltype(&cudnnGetConvolutionBackwardFilterWorkspaceSize) backward_filter_workspace;
    decltype(&cudnnConvolutionForward)                     forward;
    decltype(&cudnnConvolutionBackwardData)                backward_data;
    decltype(&cudnnConvolutionBackwardFilter)              backward_filter;
};
extern dg__cudnn_api dg__cudnn;
#endif

#endif
