// MPI glue of kloss (vocabulary-parallel ops): filled by the MPI issue.
#include <kloss/registry.hpp>
