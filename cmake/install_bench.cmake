# The installed command (included by CMakeLists.txt when the bench is built
# and DG_INSTALL is on), install component bench:
#   bin/duograd-bench: the build tree's bench under a name that says what it
#     is (its own link of bench/cli/main.c, with the installed rpath from
#     the start: no build-tree path to rewrite);
#   share/man/man1/duograd-bench.1.gz: its man page, made by Debian's
#     help2man from its --help and --version (duograd-bench.h2m adds what
#     --help does not say), where help2man is installed.
set(DG_BENCH_SUMMARY "benchmark reverse-mode autodiff on the CPU and the GPU side by side")
add_executable(duograd-bench ${PROJECT_SOURCE_DIR}/bench/cli/main.c)
target_compile_options(duograd-bench PRIVATE ${DG_WARNINGS})
target_link_libraries(duograd-bench PRIVATE dg_bench)
set_target_properties(duograd-bench PROPERTIES INSTALL_RPATH "${DG_OPENBLAS_RPATH}" BUILD_WITH_INSTALL_RPATH ON)
install(TARGETS duograd-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT bench)

find_program(DG_HELP2MAN help2man)
if(NOT DG_HELP2MAN)
  message(WARNING "help2man not found: duograd-bench is installed without its man page (apt-get install help2man)")
  return()
endif()
# help2man names the page after the program it runs: a wrapper called
# duograd-bench runs the bench, its usage lines naming the command as
# installed (the build tree's bench calls itself bench)
set(DG_MAN_DIR ${PROJECT_BINARY_DIR}/man)
file(GENERATE OUTPUT ${DG_MAN_DIR}/duograd-bench INPUT ${CMAKE_CURRENT_LIST_DIR}/duograd-bench-help.sh.in
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
add_custom_command(OUTPUT ${DG_MAN_DIR}/duograd-bench.1.gz
  COMMAND ${DG_HELP2MAN} --no-info --no-discard-stderr --version-string=${PROJECT_VERSION}
          --name=${DG_BENCH_SUMMARY}
          --include=${CMAKE_CURRENT_LIST_DIR}/duograd-bench.h2m
          --output=${DG_MAN_DIR}/duograd-bench.1 ${DG_MAN_DIR}/duograd-bench
  COMMAND gzip -9nf ${DG_MAN_DIR}/duograd-bench.1
  DEPENDS duograd-bench ${CMAKE_CURRENT_LIST_DIR}/duograd-bench.h2m ${CMAKE_CURRENT_LIST_DIR}/duograd-bench-help.sh.in
  COMMENT "duograd: the man page of duograd-bench (help2man)"
  VERBATIM)
add_custom_target(dg_man ALL DEPENDS ${DG_MAN_DIR}/duograd-bench.1.gz)
install(FILES ${DG_MAN_DIR}/duograd-bench.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT bench)
