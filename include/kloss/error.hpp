// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file error.hpp
/// The kloss exception hierarchy. Every message starts "kloss::<op>: " and
/// names the argument, what was expected and what was found.
#include <stdexcept>
#include <string>

namespace kloss {

/// Base of every error kloss throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// An option or argument value that the op does not accept.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};
/// Shapes (extents, ranks) that disagree.
class DimensionMismatch : public Error {
 public:
  using Error::Error;
};
/// A target, class or embedding index outside its allowed range.
class IndexOutOfRange : public Error {
 public:
  using Error::Error;
};
/// An op, option or dtype that kloss does not implement.
class NotImplemented : public Error {
 public:
  using Error::Error;
};
/// An MPI call failed, or ranks disagree.
class MpiError : public Error {
 public:
  using Error::Error;
};
/// A call into a product library (oneDNN, cuBLAS, rocBLAS) failed.
class LibraryError : public Error {
 public:
  using Error::Error;
};
/// An HDF5 call failed or a file does not follow the schema.
class Hdf5Error : public Error {
 public:
  using Error::Error;
};

}  // namespace kloss
