# The CUDA kernels' library, shared by the main build and bench/cuda's standalone build.
# kvf_add_cuda_library(<src dir> <core target>): kvf_cuda from <src>/exec/cuda/*.cu and *.cpp.
function(kvf_add_cuda_library src core)
  file(GLOB sources CONFIGURE_DEPENDS ${src}/exec/cuda/*.cu ${src}/exec/cuda/*.cpp)
  add_library(kvf_cuda STATIC ${sources})
  target_include_directories(kvf_cuda PUBLIC ${src})
  target_link_libraries(kvf_cuda PUBLIC ${core} CUDA::cudart)
  set_target_properties(kvf_cuda PROPERTIES CUDA_ARCHITECTURES 90 CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF)
  target_compile_options(kvf_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --Werror=all-warnings -Xptxas=-warn-spills>)
  if(KVF_CUDA_DEFINES)  # tile overrides for bench/cuda/run.sh's variant sweep
    target_compile_definitions(kvf_cuda PRIVATE ${KVF_CUDA_DEFINES})
  endif()
  if(KVF_CUDA_PTXAS_VERBOSE)  # registers, shared memory, spills per kernel into the build log
    target_compile_options(kvf_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v>)
  endif()
endfunction()
