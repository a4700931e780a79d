// Turns a SchedulerOutput into the flat ModelInputBatch a ModelRunner consumes, and remembers
// which logits rows belong to which request so the engine can route them back.
#pragma once

#include <vector>

#include "engine/model_runner.h"
#include "sched/scheduler_output.h"

namespace locus {

// Where a scheduled request's logits rows are, index-aligned with SchedulerOutput::scheduled.
struct LogitsLayout {
  int first_row = 0;
  int num_prompt_logprob_rows = 0;        // rows first_row.. predict prompt tokens
  int first_prompt_logprob_position = 0;  // sequence position of the first such row
  int sample_row = -1;                    // -1 when the request does not sample this step
};

struct BuiltBatch {
  ModelInputBatch batch;
  std::vector<LogitsLayout> layout;
};

// Pure function of its input: the same plan always gives the same arrays. The first form
// refills `out`, reusing its capacity, so steady-state steps allocate nothing.
void build_model_input(const SchedulerOutput& scheduled, int block_size, BuiltBatch& out);
BuiltBatch build_model_input(const SchedulerOutput& scheduled, int block_size);

}  // namespace locus
