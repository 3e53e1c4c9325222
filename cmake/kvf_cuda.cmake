# The CUDA kernels' library, shared by the main build and bench/cuda's standalone build.
# kvf_add_cuda_library(<src dir> <core target>): kvf_cuda from <src>/exec/cuda/*.cu and *.cpp.
# Files named *_sm90a.cu use Hopper-only instructions (wgmma) and build for sm_90a alone, in
# an object library of their own; everything else builds for sm_90.
function(kvf_add_cuda_library src core)
  file(GLOB sources CONFIGURE_DEPENDS ${src}/exec/cuda/*.cu ${src}/exec/cuda/*.cpp)
  file(GLOB sm90a_sources CONFIGURE_DEPENDS ${src}/exec/cuda/*_sm90a.cu)
  list(REMOVE_ITEM sources ${sm90a_sources})
  set(cuda_flags -Xcompiler=-Wall,-Wextra --Werror=all-warnings -Xptxas=-warn-spills)
  if(KVF_CUDA_PTXAS_VERBOSE)  # registers, shared memory, spills per kernel into the build log
    list(APPEND cuda_flags -Xptxas=-v)
  endif()

  add_library(kvf_cuda_sm90a OBJECT ${sm90a_sources})
  target_include_directories(kvf_cuda_sm90a PUBLIC ${src})
  target_link_libraries(kvf_cuda_sm90a PUBLIC CUDA::cudart)
  set_target_properties(kvf_cuda_sm90a PROPERTIES CUDA_ARCHITECTURES 90a CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
                                                  CUDA_EXTENSIONS OFF POSITION_INDEPENDENT_CODE ON)
  target_compile_options(kvf_cuda_sm90a PRIVATE ${cuda_flags})

  add_library(kvf_cuda STATIC ${sources} $<TARGET_OBJECTS:kvf_cuda_sm90a>)
  target_include_directories(kvf_cuda PUBLIC ${src})
  target_link_libraries(kvf_cuda PUBLIC ${core} CUDA::cudart)
  set_target_properties(kvf_cuda PROPERTIES CUDA_ARCHITECTURES 90 CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF)
  target_compile_options(kvf_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:${cuda_flags}>)
endfunction()
