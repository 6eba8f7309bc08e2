# Fails when a layer includes what DESIGN §1 forbids it: Qt in kernels/ or core/ (core/io and
# core/view included), LibTorch or HDF5 in kernels/, HDF5 in core/ outside core/io/, LibTorch
# in core/view/ (the view model uses core's plain headers) or in core/io/ (the .pt reader
# parses torch.save files itself), core/io or core/view in the rest of core/ (core does not
# know its readers or its views), app/ in core/, LibTorch anywhere in app/ (it must never meet
# Qt headers), QCustomPlot in app/ outside app/plot/, in app/export/ (shared with the CLI's
# export) any window, panel or session context of app/gui/, app/panels/, and outside
# kernels/cpu the CPU kernels' headers: kernels/cuda takes the shared vocabulary from
# kernels/*.h (which include nothing from kernels/cpu, kernels/cuda, kernels/reference) and its
# own files. A panel (app/panels/) talks to the others through the session context: it
# includes no other panel's header, nor the window or the navigation / view-state controllers;
# and no controller of app/gui/ reaches into a panel (only the window, which builds them, may
# include app/panels/).
# Usage: cmake -DROOT=<source dir> -P check_layering.cmake
set(violations "")

function(check_dir dir pattern what)
  file(GLOB_RECURSE files "${ROOT}/${dir}/*.h" "${ROOT}/${dir}/*.hpp" "${ROOT}/${dir}/*.cpp"
       "${ROOT}/${dir}/*.cu" "${ROOT}/${dir}/*.cuh")
  foreach(f IN LISTS files)
    if(DEFINED ARGV3 AND f MATCHES "${ARGV3}")
      continue()
    endif()
    file(STRINGS "${f}" hits REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"](${pattern})")
    foreach(h IN LISTS hits)
      list(APPEND violations "${f}: ${what}: ${h}")
    endforeach()
  endforeach()
  set(violations "${violations}" PARENT_SCOPE)
endfunction()

set(qt "Q[A-Za-z]+|qcustomplot|Qt[A-Za-z]*/")
check_dir(kernels "${qt}" "Qt in kernels/")
check_dir(kernels "torch/|ATen/|c10/|caffe2/" "LibTorch in kernels/")
check_dir(kernels "hdf5|H5[A-Za-z]*\\.h" "HDF5 in kernels/")
check_dir(kernels/cuda "kernels/(cpu|reference)/|core/|app/" "kernels/cuda beyond kernels/*.h")
check_dir(kernels "kernels/(cpu|cuda|reference)/" "a kernels/ subfolder in kernels/*.h"
          "/kernels/(cpu|cuda|reference)/")
check_dir(core "${qt}" "Qt in core/")
check_dir(core "hdf5|H5[A-Za-z]*\\.h" "HDF5 in core/ outside core/io/" "/core/io/")
check_dir(core/view "torch/|ATen/|c10/|caffe2/" "LibTorch in core/view/")
check_dir(core/io "torch/|ATen/|c10/|caffe2/" "LibTorch in core/io/ (the readers parse .pt themselves)")
check_dir(core "core/view/" "core/view in core/ outside core/view/" "/core/view/")
check_dir(core "core/io/" "core/io in core/ outside core/io/" "/core/io/")
check_dir(core "app/" "app/ in core/")
check_dir(app "torch/|ATen/|c10/|caffe2/" "LibTorch in app/")
check_dir(app/export "app/(gui|panels)/" "the GUI in app/export/")
check_dir(app "qcustomplot" "QCustomPlot in app/ outside app/plot/" "/app/plot/")
check_dir(app/panels "app/gui/(MainWindow|NavigationController|ViewStateController)\\.h"
          "the window or a navigation controller in a panel")
check_dir(app/gui "app/panels/" "a panel in a controller (only the window builds panels)"
          "/app/gui/MainWindow[A-Za-z]*\\.(h|cpp)$")
file(GLOB panels "${ROOT}/app/panels/*Panel.h" "${ROOT}/app/panels/*Panel.cpp")
foreach(f IN LISTS panels)
  get_filename_component(own "${f}" NAME_WE)
  file(STRINGS "${f}" hits REGEX "^[ \t]*#[ \t]*include[ \t]*\"app/panels/[A-Za-z]+Panel\\.h\"")
  foreach(h IN LISTS hits)
    if(NOT h MATCHES "/${own}\\.h\"")
      list(APPEND violations "${f}: another panel in a panel: ${h}")
    endif()
  endforeach()
endforeach()

if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "layering violations:\n  ${text}")
endif()
message(STATUS "layering rules hold")
