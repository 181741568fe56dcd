# Compile-only check: every CUDA object of gossamer::cuda holds device code for each required
# architecture (nvcc names the images "sm_NN" in the embedded fat binary). The CI build compiles
# the kernels for CMAKE_CUDA_ARCHITECTURES, and a kernel that fails for one of them fails the
# build; this test fails when an architecture is dropped from the build.
# Usage: cmake -DOBJECTS=a.o;b.o -DARCHS=80;90 -P check_archs.cmake
set(_checked 0)
foreach(obj IN LISTS OBJECTS)
  if(NOT obj MATCHES "\\.cu\\.o$")
    continue()
  endif()
  file(STRINGS "${obj}" found REGEX "sm_[0-9]+")
  foreach(arch IN LISTS ARCHS)
    if(NOT found MATCHES "sm_${arch}")
      message(FATAL_ERROR "${obj}: no device code for sm_${arch}; build with "
                          "CMAKE_CUDA_ARCHITECTURES including ${arch}")
    endif()
  endforeach()
  math(EXPR _checked "${_checked} + 1")
endforeach()
if(_checked EQUAL 0)
  message(FATAL_ERROR "no CUDA object of gossamer::cuda was given")
endif()
message(STATUS "${_checked} CUDA objects hold code for sm_${ARCHS}")
