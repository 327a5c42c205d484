// HDF5 golden-file reader: filled by the validation issue.
#include <kloss/registry.hpp>
