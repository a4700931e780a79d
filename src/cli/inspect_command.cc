// `locus inspect MODEL_DIR`: parse a model's config and check its checkpoint (placeholder until
// the config and checkpoint readers land in this commit series).
#include "cli/commands.h"

namespace locus::cli {

void add_inspect_command(CLI::App&, Runner&) {}

}  // namespace locus::cli
