// CUDA side of backend/device.h. Never fails hard: a missing driver or GPU is a report, not an
// error, because the same binary must serve from the CPU there.
#pragma once

#include "backend/device.h"

namespace locus::cuda {

DeviceReport query_cuda_devices();

}  // namespace locus::cuda
