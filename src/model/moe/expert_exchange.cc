#include "model/moe/expert_exchange.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <string_view>

namespace locus {
namespace {

// The most tokens any rank of `comm` has: an all-gather of the counts, read back on the host
// (for callers that did not agree on it before the step).
Expected<int64_t> longest_rank(Communicator& comm, Ops& ops, int64_t tokens) {
  const int64_t ranks = comm.size();
  LOCUS_ASSIGN_OR_RETURN(Tensor count, Tensor::empty({1}, DType::kI32));
  count.data<int32_t>()[0] = static_cast<int32_t>(tokens);
  LOCUS_ASSIGN_OR_RETURN(Tensor count_dev, ops.to_device(count));
  LOCUS_ASSIGN_OR_RETURN(Tensor counts_dev, ops.empty({ranks}, DType::kI32));
  LOCUS_RETURN_IF_ERROR(comm.all_gather(count_dev, counts_dev, 0));
  LOCUS_ASSIGN_OR_RETURN(Tensor counts, ops.to_host(counts_dev));
  int64_t longest = 0;
  for (int64_t r = 0; r < ranks; ++r)
    longest = std::max<int64_t>(longest, counts.data<int32_t>()[r]);
  return longest;
}

// The step's most tokens on any rank: `max_tokens` when the caller knows it, else asked.
Expected<int64_t> step_max_tokens(Communicator& comm, Ops& ops, int64_t tokens, int64_t max_tokens,
                                  std::string_view exchange) {
  if (max_tokens == 0) return longest_rank(comm, ops, tokens);
  if (max_tokens < tokens) {
    return internal_error(
        fmt::format("{}: this rank has {} tokens, more than the step's agreed most {}", exchange,
                    tokens, max_tokens));
  }
  return max_tokens;
}

// The baseline (vLLM's allgather_reducescatter): every rank gathers every rank's tokens, padded
// to the longest rank's count so that all send one shape, runs its experts on all of them and
// gets its own rows of the sum back. Padding rows are zeros routed to expert 0 with weight 0.
class AllGatherReduceScatter final : public ExpertExchange {
 public:
  explicit AllGatherReduceScatter(Communicator& comm) : comm_(comm) {}

  Expected<ExpertDispatch> prepare(Ops& ops, const Tensor& x, const Tensor& topk_ids,
                                   const Tensor& topk_weights, int64_t max_tokens) const override {
    const int64_t tokens = x.size(0);
    LOCUS_ASSIGN_OR_RETURN(const int64_t longest, step_max_tokens(comm_, ops, tokens, max_tokens,
                                                                  "allgather_reducescatter"));
    ExpertDispatch d;
    d.tokens = tokens;
    d.padded = longest;
    LOCUS_ASSIGN_OR_RETURN(d.x, gather_padded(ops, x, longest));
    LOCUS_ASSIGN_OR_RETURN(d.topk_ids, gather_padded(ops, topk_ids, longest));
    LOCUS_ASSIGN_OR_RETURN(d.topk_weights, gather_padded(ops, topk_weights, longest));
    return d;
  }

  Expected<Tensor> finalize(Ops& ops, const ExpertDispatch& d,
                            const Tensor& expert_out) const override {
    const int64_t hidden = expert_out.size(1);
    LOCUS_ASSIGN_OR_RETURN(Tensor mine, ops.empty({d.padded, hidden}, expert_out.dtype()));
    LOCUS_RETURN_IF_ERROR(comm_.reduce_scatter_sum(expert_out, mine));
    if (d.padded == d.tokens) return mine;
    LOCUS_ASSIGN_OR_RETURN(Tensor out, ops.empty({d.tokens, hidden}, expert_out.dtype()));
    LOCUS_ASSIGN_OR_RETURN(Tensor used, mine.slice(0, 0, d.tokens));
    LOCUS_RETURN_IF_ERROR(ops.copy(used, out));
    return out;
  }

 private:
  // t [T, n] zero-padded to [rows, n] on every rank and gathered: [ranks * rows, n].
  Expected<Tensor> gather_padded(Ops& ops, const Tensor& t, int64_t rows) const {
    Tensor padded = t;
    if (rows != t.size(0)) {
      LOCUS_ASSIGN_OR_RETURN(padded, ops.zeros({rows, t.size(1)}, t.dtype()));
      LOCUS_ASSIGN_OR_RETURN(Tensor head, padded.slice(0, 0, t.size(0)));
      LOCUS_RETURN_IF_ERROR(ops.copy(t, head));
    }
    LOCUS_ASSIGN_OR_RETURN(Tensor all, ops.empty({comm_.size() * rows, t.size(1)}, t.dtype()));
    LOCUS_RETURN_IF_ERROR(comm_.all_gather(padded, all, 0));
    return all;
  }

  Communicator& comm_;
};

// Naive all-to-all: each token goes once to every rank that holds one of its experts (with its
// whole routing; the receiver skips the experts it does not hold), and each rank's partial sum
// comes back the same way. The send lists are planned on the host from the routing, so every
// layer reads topk_ids back and exchanges counts before the rows: one host sync per layer, the
// price of sending only what is needed.
class NaiveAllToAll final : public ExpertExchange {
 public:
  NaiveAllToAll(Communicator& comm, std::vector<int> owner)
      : comm_(comm), owner_(std::move(owner)) {}

  Expected<ExpertDispatch> prepare(
      Ops& ops, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
      int64_t /*max_tokens: the per-pair counts replace it*/) const override {
    const int64_t tokens = x.size(0);
    const int64_t k = topk_ids.size(1);
    const auto ranks = static_cast<size_t>(comm_.size());
    LOCUS_ASSIGN_OR_RETURN(Tensor ids, ops.to_host(topk_ids));
    LOCUS_ASSIGN_OR_RETURN(Tensor weights, ops.to_host(topk_weights));

    // dests[t]: the ranks token t goes to, ascending.
    std::vector<std::vector<int>> dests(static_cast<size_t>(tokens));
    std::vector<std::vector<int32_t>> lists(ranks);
    size_t slots = 0;
    std::vector<char> sends_to(ranks);
    for (int64_t t = 0; t < tokens; ++t) {
      std::fill(sends_to.begin(), sends_to.end(), 0);
      for (int64_t j = 0; j < k; ++j) {
        const int32_t e = ids.data<int32_t>()[t * k + j];
        if (e < 0 || static_cast<size_t>(e) >= owner_.size()) {
          return internal_error(fmt::format(
              "naive all-to-all: the router chose expert {}, which this layer does not have", e));
        }
        const int owner = owner_[static_cast<size_t>(e)];
        if (owner >= 0) sends_to[static_cast<size_t>(owner)] = 1;
      }
      auto& mine = dests[static_cast<size_t>(t)];
      for (size_t r = 0; r < ranks; ++r) {
        if (!sends_to[r]) continue;
        mine.push_back(static_cast<int>(r));
        lists[r].push_back(static_cast<int32_t>(t));
      }
      slots = std::max(slots, mine.size());
    }

    ExpertDispatch d;
    d.tokens = tokens;
    d.send_counts.resize(ranks);
    std::vector<int32_t> order;  // the rows sent, rank by rank
    std::vector<int64_t> first(ranks, 0);
    for (size_t r = 0; r < ranks; ++r) {
      first[r] = static_cast<int64_t>(order.size());
      d.send_counts[r] = static_cast<int64_t>(lists[r].size());
      order.insert(order.end(), lists[r].begin(), lists[r].end());
    }
    const auto sent = static_cast<int64_t>(order.size());
    LOCUS_ASSIGN_OR_RETURN(d.recv_counts, exchange_counts(ops, d.send_counts));
    int64_t received = 0;
    for (int64_t c : d.recv_counts)
      received += c;

    // The rows to send with their routing, and where each token's shares will come back.
    LOCUS_ASSIGN_OR_RETURN(Tensor send_ids, Tensor::empty({sent, k}, DType::kI32));
    LOCUS_ASSIGN_OR_RETURN(Tensor send_weights, Tensor::empty({sent, k}, DType::kF32));
    for (int64_t i = 0; i < sent; ++i) {
      const int64_t t = order[static_cast<size_t>(i)];
      std::copy_n(ids.data<int32_t>() + t * k, k, send_ids.data<int32_t>() + i * k);
      std::copy_n(weights.data<float>() + t * k, k, send_weights.data<float>() + i * k);
    }
    for (size_t j = 0; j < slots; ++j) {
      LOCUS_ASSIGN_OR_RETURN(Tensor index, Tensor::empty({tokens}, DType::kI32));
      for (int64_t t = 0; t < tokens; ++t) {
        const auto& to = dests[static_cast<size_t>(t)];
        int64_t row = sent;  // the zero row
        if (j < to.size()) {
          const auto r = static_cast<size_t>(to[j]);
          const auto& list = lists[r];
          row = first[r] + (std::lower_bound(list.begin(), list.end(), t) - list.begin());
        }
        index.data<int32_t>()[t] = static_cast<int32_t>(row);
      }
      LOCUS_ASSIGN_OR_RETURN(Tensor on_device, ops.to_device(index));
      d.combine_index.push_back(std::move(on_device));
    }

    const int64_t hidden = x.size(1);
    LOCUS_ASSIGN_OR_RETURN(Tensor send_x, ops.empty({sent, hidden}, x.dtype()));
    if (sent > 0) {
      LOCUS_ASSIGN_OR_RETURN(Tensor order_host, Tensor::empty({sent}, DType::kI32));
      std::copy(order.begin(), order.end(), order_host.data<int32_t>());
      LOCUS_ASSIGN_OR_RETURN(Tensor order_dev, ops.to_device(order_host));
      LOCUS_RETURN_IF_ERROR(ops.gather_rows(x, order_dev, send_x));
    }
    LOCUS_ASSIGN_OR_RETURN(Tensor send_ids_dev, ops.to_device(send_ids));
    LOCUS_ASSIGN_OR_RETURN(Tensor send_weights_dev, ops.to_device(send_weights));
    LOCUS_ASSIGN_OR_RETURN(d.x, ops.empty({received, hidden}, x.dtype()));
    LOCUS_ASSIGN_OR_RETURN(d.topk_ids, ops.empty({received, k}, DType::kI32));
    LOCUS_ASSIGN_OR_RETURN(d.topk_weights, ops.empty({received, k}, DType::kF32));
    LOCUS_RETURN_IF_ERROR(comm_.all_to_all(send_x, d.send_counts, d.x, d.recv_counts));
    LOCUS_RETURN_IF_ERROR(comm_.all_to_all(send_ids_dev, d.send_counts, d.topk_ids, d.recv_counts));
    LOCUS_RETURN_IF_ERROR(
        comm_.all_to_all(send_weights_dev, d.send_counts, d.topk_weights, d.recv_counts));
    return d;
  }

  Expected<Tensor> finalize(Ops& ops, const ExpertDispatch& d,
                            const Tensor& expert_out) const override {
    const int64_t hidden = expert_out.size(1);
    const DType dtype = expert_out.dtype();
    int64_t sent = 0;
    for (int64_t c : d.send_counts)
      sent += c;
    // The shares come back in send order, followed by one zero row for tokens with fewer ranks
    // than the slot being summed.
    LOCUS_ASSIGN_OR_RETURN(Tensor back, ops.zeros({sent + 1, hidden}, dtype));
    LOCUS_ASSIGN_OR_RETURN(Tensor shares, back.slice(0, 0, sent));
    LOCUS_RETURN_IF_ERROR(comm_.all_to_all(expert_out, d.recv_counts, shares, d.send_counts));
    LOCUS_ASSIGN_OR_RETURN(Tensor out, ops.zeros({d.tokens, hidden}, dtype));
    LOCUS_ASSIGN_OR_RETURN(Tensor share, ops.empty({d.tokens, hidden}, dtype));
    for (size_t j = 0; j < d.combine_index.size(); ++j) {
      LOCUS_RETURN_IF_ERROR(ops.gather_rows(back, d.combine_index[j], j == 0 ? out : share));
      if (j > 0) LOCUS_RETURN_IF_ERROR(ops.add(out, share, out));
    }
    return out;
  }

 private:
  // Every rank's send counts to this rank: an all-to-all of one count per pair.
  Expected<std::vector<int64_t>> exchange_counts(Ops& ops,
                                                 std::span<const int64_t> send_counts) const {
    const auto ranks = static_cast<int64_t>(send_counts.size());
    LOCUS_ASSIGN_OR_RETURN(Tensor counts, Tensor::empty({ranks, 1}, DType::kI64));
    std::copy(send_counts.begin(), send_counts.end(), counts.data<int64_t>());
    LOCUS_ASSIGN_OR_RETURN(Tensor send_dev, ops.to_device(counts));
    LOCUS_ASSIGN_OR_RETURN(Tensor recv_dev, ops.empty({ranks, 1}, DType::kI64));
    const std::vector<int64_t> ones(static_cast<size_t>(ranks), 1);
    LOCUS_RETURN_IF_ERROR(comm_.all_to_all(send_dev, ones, recv_dev, ones));
    LOCUS_ASSIGN_OR_RETURN(Tensor recv, ops.to_host(recv_dev));
    return std::vector<int64_t>(recv.data<int64_t>(), recv.data<int64_t>() + ranks);
  }

  Communicator& comm_;
  std::vector<int> owner_;  // expert -> rank, -1 for another column's
};

// The low-latency all-to-all: what naive sends, in blocks of a fixed size. Every pair of ranks
// exchanges `capacity` rows (the step's most tokens on any rank, agreed once per step), so the
// counts never go through the host; the send plan (Ops::moe_dispatch_plan) is made on the
// device, empty slots route nowhere (ids -1) and come back as zero rows. No host sync per
// layer, at the price of moving whole blocks: the decode trade DeepEP's low-latency kernels make.
class LowLatencyAllToAll final : public ExpertExchange {
 public:
  LowLatencyAllToAll(Communicator& comm, std::vector<int> owner)
      : comm_(comm), owner_(std::move(owner)) {}

  Expected<ExpertDispatch> prepare(Ops& ops, const Tensor& x, const Tensor& topk_ids,
                                   const Tensor& topk_weights, int64_t max_tokens) const override {
    const int64_t tokens = x.size(0);
    const int64_t k = topk_ids.size(1);
    const int64_t ranks = comm_.size();
    if (!owner_dev_.defined()) {
      LOCUS_ASSIGN_OR_RETURN(Tensor owner,
                             Tensor::empty({static_cast<int64_t>(owner_.size())}, DType::kI32));
      std::copy(owner_.begin(), owner_.end(), owner.data<int32_t>());
      LOCUS_ASSIGN_OR_RETURN(owner_dev_, ops.to_device(owner));
    }
    ExpertDispatch d;
    d.tokens = tokens;
    LOCUS_ASSIGN_OR_RETURN(d.capacity,
                           step_max_tokens(comm_, ops, tokens, max_tokens, "low_latency"));
    const int64_t rows = ranks * d.capacity;
    LOCUS_ASSIGN_OR_RETURN(Tensor send_index, ops.empty({rows}, DType::kI32));
    LOCUS_ASSIGN_OR_RETURN(Tensor send_ids, ops.empty({rows, k}, DType::kI32));
    LOCUS_ASSIGN_OR_RETURN(Tensor send_weights, ops.empty({rows, k}, DType::kF32));
    LOCUS_ASSIGN_OR_RETURN(d.block_combine_index, ops.empty({ranks, tokens}, DType::kI32));
    LOCUS_RETURN_IF_ERROR(ops.moe_dispatch_plan(topk_ids, topk_weights, owner_dev_, ranks,
                                                d.capacity, send_index, send_ids, send_weights,
                                                d.block_combine_index));
    LOCUS_ASSIGN_OR_RETURN(Tensor send_x, ops.empty({rows, x.size(1)}, x.dtype()));
    LOCUS_RETURN_IF_ERROR(ops.gather_rows(x, send_index, send_x));
    const std::vector<int64_t> blocks(static_cast<size_t>(ranks), d.capacity);
    LOCUS_ASSIGN_OR_RETURN(d.x, ops.empty({rows, x.size(1)}, x.dtype()));
    LOCUS_ASSIGN_OR_RETURN(d.topk_ids, ops.empty({rows, k}, DType::kI32));
    LOCUS_ASSIGN_OR_RETURN(d.topk_weights, ops.empty({rows, k}, DType::kF32));
    LOCUS_RETURN_IF_ERROR(comm_.all_to_all(send_x, blocks, d.x, blocks));
    LOCUS_RETURN_IF_ERROR(comm_.all_to_all(send_ids, blocks, d.topk_ids, blocks));
    LOCUS_RETURN_IF_ERROR(comm_.all_to_all(send_weights, blocks, d.topk_weights, blocks));
    return d;
  }

  Expected<Tensor> finalize(Ops& ops, const ExpertDispatch& d,
                            const Tensor& expert_out) const override {
    const std::vector<int64_t> blocks(static_cast<size_t>(comm_.size()), d.capacity);
    LOCUS_ASSIGN_OR_RETURN(Tensor back, ops.empty(expert_out.shape(), expert_out.dtype()));
    LOCUS_RETURN_IF_ERROR(comm_.all_to_all(expert_out, blocks, back, blocks));
    LOCUS_ASSIGN_OR_RETURN(Tensor out,
                           ops.empty({d.tokens, expert_out.size(1)}, expert_out.dtype()));
    LOCUS_RETURN_IF_ERROR(ops.gather_sum_rows(back, d.block_combine_index, out));
    return out;
  }

 private:
  Communicator& comm_;
  std::vector<int> owner_;    // expert -> rank, -1 for another column's
  mutable Tensor owner_dev_;  // the same on the device, uploaded by the first prepare
};

}  // namespace

std::unique_ptr<ExpertExchange> make_expert_exchange(const ModelParallel& parallel,
                                                     int64_t num_experts) {
  if (parallel.all2all != All2AllBackend::kAllGatherReduceScatter) {
    std::vector<int> owner(static_cast<size_t>(num_experts));
    for (int64_t e = 0; e < num_experts; ++e)
      owner[static_cast<size_t>(e)] = parallel.exchange_owner(e, num_experts);
    if (parallel.all2all == All2AllBackend::kLowLatency) {
      return std::make_unique<LowLatencyAllToAll>(*parallel.dp, std::move(owner));
    }
    return std::make_unique<NaiveAllToAll>(*parallel.dp, std::move(owner));
  }
  return std::make_unique<AllGatherReduceScatter>(*parallel.dp);
}

}  // namespace locus
