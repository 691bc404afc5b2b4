// The host Tensor is part of the public API: kiln/tensor.h. This header keeps the internal
// spelling `#include "core/tensor.h"` working.
#pragma once

#include "kiln/tensor.h"
