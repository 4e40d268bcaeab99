# crfx — the layering of the sources, checked: every #include "…" of a file under include/crfx,
# host/, kernels/ and factory/ must name a part that the file's own part may depend on. Run by ctest
# (test `layering`); a forbidden include fails it, naming file, line and both parts.
#   cmake -DROOT=<source tree> -P cmake/check_layering.cmake
#
# Parts, bottom up, and what each may include (besides itself):
#   base      errors.hpp, host_device.hpp, host/util
#   io        io.hpp, format.hpp, output.hpp, host/io → base
#   data      corpus.hpp, host/data                → base
#   features  features.hpp, template.hpp, host/features → io data base
#   model     model.hpp, host/model                → features io data base
#   backend   backend.hpp (the interface), loss.hpp, step_params.hpp → data base
#   rules     host/rules (the optimizers' element rules) → backend data base
#   cpu       host/cpu (the CPU backend)           → rules backend data base
#   cuda      kernels/ (cuda_api.hpp and the rest)  → rules backend data base
#   factory   factory/ (make_backend: the choice of a backend) → cpu cuda backend data base
#   dist      collective.hpp, host/dist (data-parallel runs: the collective, shards, the summing
#             backend; host/dist/mpi is built only with MPI)  → backend data base
#   optim     trainer.hpp, host/optim              → rules backend data base
#   eval      eval.hpp, host/eval                  → io base
#   tag       tagger.hpp, tag_run.hpp, host/tag   → model features backend io data base
#   api       train.hpp, host/train (a training run: the one entry point of the CLI and Python)
#                                                  → dist tag eval optim model features backend io data base
# The public headers: the stable API directly in include/crfx/ (stable_headers below: what a program
# built against the installed package includes; the examples/ may include nothing else), every
# other header in include/crfx/internal/ (installed, since the stable ones include them, but with no
# promise between versions). apps/ and tests/ may use every part and are not checked. So optimizers see the Backend interface,
# never a backend; of host/ kernels see only host/rules, and no part of host/ sees kernels/ (the
# factory, which does, is a folder of its own above both); the readers never see features or models.
cmake_minimum_required(VERSION 3.24)
if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<source tree> -P check_layering.cmake")
endif()

set(allowed_base "")
set(allowed_rules backend data base)
set(allowed_io base)
set(allowed_data base)
set(allowed_features io data base)
set(allowed_model features io data base)
set(allowed_backend data base)
set(allowed_cuda rules backend data base)
set(allowed_cpu rules backend data base)
set(allowed_factory cpu cuda backend data base)
set(allowed_optim rules backend data base)
set(allowed_eval io base)
set(allowed_tag model features backend io data base)
set(allowed_dist backend data base)
set(allowed_api dist tag eval optim model features backend io data base)

# The stable API (include/crfx/<name>.hpp); every other header is include/crfx/internal/<name>.hpp.
set(stable_headers train tagger model errors)
# The part a public header belongs to.
set(header_errors base)
set(header_host_device base)
set(header_io io)
set(header_format io)
set(header_output io)
set(header_corpus data)
set(header_features features)
set(header_template features)
set(header_model model)
set(header_backend backend)
set(header_loss backend)
set(header_step_params backend)
set(header_trainer optim)
set(header_checkpoint optim)
set(header_eval eval)
set(header_tagger tag)
set(header_tag_run tag)
set(header_collective dist)
set(header_train api)
# The part of a folder under host/.
set(folder_util base)
set(folder_backend backend)
set(folder_io io)
set(folder_data data)
set(folder_features features)
set(folder_model model)
set(folder_cpu cpu)
set(folder_optim optim)
set(folder_rules rules)
set(folder_eval eval)
set(folder_tag tag)
set(folder_dist dist)
set(folder_train api)

# part_of_file(<path relative to ROOT> <out>): the part of a source file, or "" when unchecked.
function(part_of_file rel out)
  set(part "")
  if(rel MATCHES "^include/crfx/(internal/)?([a-z0-9_]+)\\.hpp$")
    set(part "${header_${CMAKE_MATCH_2}}")
    set(stable "${CMAKE_MATCH_2}")
    set(internal "${CMAKE_MATCH_1}")
    if(internal STREQUAL "" AND NOT stable IN_LIST stable_headers)
      message(SEND_ERROR "${rel}: only the stable API (${stable_headers}) lives in include/crfx/; an internal header goes to include/crfx/internal/")
    elseif(NOT internal STREQUAL "" AND stable IN_LIST stable_headers)
      message(SEND_ERROR "${rel}: a stable header (${stable_headers}) belongs directly in include/crfx/")
    endif()
    if(part STREQUAL "")
      message(SEND_ERROR "${rel}: a public header that the layering does not know; add it to cmake/check_layering.cmake")
    endif()
  elseif(rel MATCHES "^factory/")
    set(part factory)
  elseif(rel MATCHES "^host/([a-z0-9_]+)/")
    set(part "${folder_${CMAKE_MATCH_1}}")
    if(part STREQUAL "")
      message(SEND_ERROR "${rel}: a folder under host/ that the layering does not know; add it to cmake/check_layering.cmake")
    endif()
  elseif(rel MATCHES "^kernels/")
    set(part cuda)
  endif()
  set(${out} "${part}" PARENT_SCOPE)
endfunction()

# part_of_include(<include string> <including file's part> <out>)
function(part_of_include inc from out)
  set(part "")
  if(inc MATCHES "^crfx/(internal/)?([a-z0-9_]+)\\.hpp$")
    set(part "${header_${CMAKE_MATCH_2}}")
  elseif(inc MATCHES "^(\\.\\./)?kernels/")
    set(part cuda)
  elseif(inc MATCHES "^([a-z0-9_]+)/([a-z0-9_]+/)?[a-z0-9_]+\\.hpp$")
    set(part "${folder_${CMAKE_MATCH_1}}")  # host/<folder>/[<subfolder>/]… (empty: unknown)
    if(part STREQUAL "" AND from STREQUAL "cuda")
      set(part cuda)  # kernels/emu/…
    endif()
  elseif(from STREQUAL "cuda" AND NOT inc MATCHES "\\.\\.")
    set(part cuda)  # kernels/ includes its own files by their bare names
  endif()
  set(${out} "${part}" PARENT_SCOPE)
endfunction()

# includes_of(<file relative to ROOT> <out>): its #include lines as items "<line>:\"<path>" or
# "<line>:<<path>" (the opening quote or bracket kept).
function(includes_of rel out)
  file(STRINGS "${ROOT}/${rel}" lines)
  set(found "")
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*([\"<])([^\">]+)[\">]")
      list(APPEND found "${n}:${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files RELATIVE "${ROOT}"
     "${ROOT}/include/crfx/*.hpp" "${ROOT}/host/*.cpp" "${ROOT}/host/*.hpp" "${ROOT}/factory/*.cpp" "${ROOT}/factory/*.hpp"
     "${ROOT}/kernels/*.cu" "${ROOT}/kernels/*.cuh" "${ROOT}/kernels/*.hpp" "${ROOT}/kernels/*.cpp" "${ROOT}/kernels/*.h")
set(violations 0)
set(checked 0)
foreach(rel IN LISTS files)
  part_of_file("${rel}" from)
  if(from STREQUAL "")
    continue()
  endif()
  math(EXPR checked "${checked} + 1")
  includes_of("${rel}" includes)
  foreach(item IN LISTS includes)
    if(NOT item MATCHES "^([0-9]+):\"(.*)$")
      continue()  # <…>: a system or library header
    endif()
    set(n "${CMAKE_MATCH_1}")
    set(inc "${CMAKE_MATCH_2}")
    part_of_include("${inc}" "${from}" to)
    if(to STREQUAL "")
      message("${rel}:${n}: #include \"${inc}\" belongs to no known part")
      math(EXPR violations "${violations} + 1")
    elseif(NOT to STREQUAL from AND NOT to IN_LIST allowed_${from})
      message("${rel}:${n}: #include \"${inc}\": part '${from}' may not depend on part '${to}'")
      math(EXPR violations "${violations} + 1")
    endif()
  endforeach()
endforeach()
# A program of examples/ (built against the installed package) includes only the stable API.
file(GLOB examples RELATIVE "${ROOT}" "${ROOT}/examples/*.cpp")
foreach(rel IN LISTS examples)
  includes_of("${rel}" includes)
  foreach(item IN LISTS includes)
    if(NOT item MATCHES "^([0-9]+):[\"<](crfx/.*)$")
      continue()
    endif()
    set(n "${CMAKE_MATCH_1}")
    set(inc "${CMAKE_MATCH_2}")
    if(NOT inc MATCHES "^crfx/([a-z0-9_]+)\\.hpp$" OR NOT CMAKE_MATCH_1 IN_LIST stable_headers)
      message("${rel}:${n}: #include \"${inc}\": an example uses only the stable API (${stable_headers})")
      math(EXPR violations "${violations} + 1")
    endif()
  endforeach()
endforeach()
if(violations GREATER 0)
  message(FATAL_ERROR "layering: ${violations} forbidden include(s) in ${checked} files")
endif()
message(STATUS "layering: ${checked} files, every include allowed")
