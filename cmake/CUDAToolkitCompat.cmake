# Lets CMake 3.25's FindCUDAToolkit configure against CUDA 12.9 and later.
#
# Stock 3.25 assumes two libraries that newer toolkits no longer ship: it sets a deprecation
# property on CUDA::nvToolsExt (gone since CUDA 12.9; nvtx3 is header-only) and links
# Threads into CUDA::nvptxcompiler_static, both without checking that the target exists,
# so configure stops with "could not find TARGET". CMake 3.26 guards both. Nothing in arbiter
# links either library, so on 3.25 empty placeholder targets stand in for them; the module
# skips its own definition of a target that already exists.
if(CMAKE_VERSION VERSION_LESS 3.26)
  foreach(missing_target IN ITEMS CUDA::nvToolsExt CUDA::nvptxcompiler_static)
    if(NOT TARGET ${missing_target})
      add_library(${missing_target} INTERFACE IMPORTED)
    endif()
  endforeach()
endif()
