# Shared settings for every gossamer target: warnings, sanitizers, include layout.
add_library(gossamer_build_flags INTERFACE)
target_compile_options(gossamer_build_flags INTERFACE -Wall -Wextra -Wpedantic)
if(GOSSAMER_WERROR)
  target_compile_options(gossamer_build_flags INTERFACE -Werror)
endif()
if(GOSSAMER_SANITIZE)
  target_compile_options(gossamer_build_flags INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(gossamer_build_flags INTERFACE -fsanitize=address,undefined)
endif()
install(TARGETS gossamer_build_flags EXPORT gossamerTargets)

# gossamer_add_module(NAME SOURCES ... PUBLIC_DEPS ... PRIVATE_DEPS ...)
# One static library per module, exported as gossamer::NAME, public headers under
# NAME/include/gossamer/NAME/.
function(gossamer_add_module name)
  cmake_parse_arguments(M "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(gossamer_${name} ${M_SOURCES})
  add_library(gossamer::${name} ALIAS gossamer_${name})
  set_target_properties(gossamer_${name} PROPERTIES EXPORT_NAME ${name}
                        OUTPUT_NAME gossamer_${name} POSITION_INDEPENDENT_CODE ON)
  target_include_directories(gossamer_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(gossamer_${name} PUBLIC cxx_std_20)
  target_link_libraries(gossamer_${name} PUBLIC ${M_PUBLIC_DEPS}
                        PRIVATE gossamer_build_flags ${M_PRIVATE_DEPS})
  install(TARGETS gossamer_${name} EXPORT gossamerTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endfunction()
