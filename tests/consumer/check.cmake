# Installs the build into a scratch prefix, then configures, builds and runs a small consumer
# project that uses find_package(gossamer) and links gossamer::topology (and, with CUDA,
# gossamer::optimizers_cuda).
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build
                        -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer configure failed:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer build failed:\n${out}\n${err}")
endif()
execute_process(COMMAND ${WORK_DIR}/build/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "ring 8: slem 0.8047")
  message(FATAL_ERROR "consumer run failed (${rc}): ${out}")
endif()
message(STATUS "consumer: ${out}")
if(WITH_CUDA)  # built with GOSSAMER_USE_CUDA: the package has gossamer::optimizers_cuda
  execute_process(COMMAND ${WORK_DIR}/build/consumer_cuda RESULT_VARIABLE rc OUTPUT_VARIABLE out)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "^(cuda device: |no CUDA device: .*; use device \"cpu\")")
    message(FATAL_ERROR "consumer_cuda run failed (${rc}): ${out}")
  endif()
  message(STATUS "consumer_cuda: ${out}")
endif()

# examples/custom_loop on its own against the installed package (gossamer::peer, gossamer/peer.hpp):
# configure, build, and train its 4 peers as threads.
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/custom_loop
                        -B ${WORK_DIR}/custom_loop -G ${GENERATOR}
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "custom_loop configure failed:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/custom_loop
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "custom_loop build failed:\n${out}\n${err}")
endif()
execute_process(COMMAND ${WORK_DIR}/custom_loop/custom_loop
                        --topology ${SOURCE_DIR}/examples/custom_loop/ring4.json --threads
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "rank 0: 300 steps, test loss")
  message(FATAL_ERROR "custom_loop run failed (${rc}): ${out}\n${err}")
endif()
message(STATUS "custom_loop (installed package): ${out}")
