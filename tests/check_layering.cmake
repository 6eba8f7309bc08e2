# Fails when a layer includes what DESIGN §1 forbids it: Qt in kernels/ or core/ (core/io
# included), LibTorch or HDF5 in kernels/, HDF5 in core/ outside core/io/, LibTorch anywhere in
# app/ (it must never meet Qt headers), QCustomPlot in app/ outside app/plot/.
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
check_dir(core "${qt}" "Qt in core/")
check_dir(core "hdf5|H5[A-Za-z]*\\.h" "HDF5 in core/ outside core/io/" "/core/io/")
check_dir(app "torch/|ATen/|c10/|caffe2/" "LibTorch in app/")
check_dir(app "qcustomplot" "QCustomPlot in app/ outside app/plot/" "/app/plot/")

if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "layering violations:\n  ${text}")
endif()
message(STATUS "layering rules hold")
