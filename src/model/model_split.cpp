// A model split over the ranks of a tensor-parallel run (docs/SCALING.md): what rank 0 sends
// before each step, the followers' loop, the sharded embedding lookup and head, and the check
// that every rank opened the same model.
#include <cstdio>
#include <exception>

#include "model/model_impl.h"

namespace nanoinfer {

// A split step that failed on one rank cannot go on anywhere: the ranks would wait for each
// other's collectives. One line, and the job ends.
void Model::Impl::abort_job() const {
  std::string what = "unknown error";
  try {
    throw;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  std::fflush(stdout);
  std::fprintf(stderr, "nanoinfer: error: rank %d: %s (the tensor-parallel job stops)\n", comm->rank(), what.c_str());
  comm->abort(1);
}

// The rows of `tokens`: on a split model each rank looks up the rows its slice of the
// vocabulary holds, zeros elsewhere, and the sum over the ranks is the lookup (exact: every
// element is one row's value plus zeros).
void Model::Impl::embed(const int32_t* tokens, size_t n, float* x) const {
  if (comm == nullptr) return embed_rows(w.embed, tokens, n, x);
  const size_t H = hidden();
  for (size_t t = 0; t < n; ++t) {
    const auto id = static_cast<size_t>(tokens[t]);
    if (id < shard.vocab_begin || id >= shard.vocab_end) {
      std::fill_n(x + t * H, H, 0.0f);
      continue;
    }
    const auto local = static_cast<int32_t>(id - shard.vocab_begin);
    embed_rows(w.embed, &local, 1, x + t * H);
  }
  comm->allreduce_sum(x, n * H);
}

// Rank 0 of a split model: the step every rank is about to run.
void Model::Impl::announce(std::span<const StepPart> parts, const int32_t* tokens, size_t n, bool head) const {
  message.op = StepMessage::Op::Step;
  message.head = head;
  message.parts.clear();
  for (const StepPart& p : parts) message.parts.push_back({p.seq->id, p.seq->cache.capacity(), p.pos, p.n, p.out});
  message.tokens.assign(tokens, tokens + n);
  take_freed();
  message.send(*comm);
}

void Model::Impl::take_freed() const {
  const std::lock_guard<std::mutex> lock(ledger->mutex);
  message.freed.swap(ledger->freed);
  ledger->freed.clear();
}

// Rank 0 of a split model: dst's cache got positions [from, to) of src's (KvCache::extend_from).
void Model::Impl::announce_copy(const Sequence::State& dst, const KvCache& src, size_t from, size_t to) const {
  const std::lock_guard<std::mutex> lock(pool_busy);
  uint64_t src_id = 0;
  {
    const std::lock_guard<std::mutex> ids(ledger->mutex);
    const auto it = ledger->ids.find(&src);
    src_id = it == ledger->ids.end() ? 0 : it->second;
  }
  if (src_id == 0) {
    std::fprintf(stderr, "nanoinfer: error: a KV cache copy from a cache that is not one of the model's sequences\n");
    comm->abort(1);
  }
  message.op = StepMessage::Op::Copy;
  message.parts.clear();
  message.tokens.clear();
  message.dst = dst.id;
  message.dst_capacity = dst.cache.capacity();
  message.from = from;
  message.src = src_id;
  message.src_capacity = src.capacity();
  message.to = to;
  take_freed();
  message.send(*comm);
}

// The head of a split model: this rank's vocabulary rows of the m rows' logits, gathered on
// rank 0 into out ([m][vocab], each rank's columns in place). False on the other ranks.
bool Model::Impl::gather_head(const Activations& a, size_t m, float* out) const {
  const size_t V = vocab(), local = static_cast<size_t>(cfg.vocab_size);
  if (head_out.size() < m * local) head_out.resize(m * local);
  linear(compute, w.lm_head, nullptr, a.xb.data(), head_out.data(), m);
  gather_counts.resize(shard.vocab_counts.size());
  for (size_t r = 0; r < gather_counts.size(); ++r) gather_counts[r] = m * shard.vocab_counts[r];
  if (comm->rank() == 0 && gathered.size() < m * V) gathered.resize(m * V);
  comm->gather(head_out.data(), gather_counts, gathered.data());
  if (comm->rank() != 0) return false;
  const float* part = gathered.data();
  size_t column = 0;
  for (size_t count : shard.vocab_counts) {
    for (size_t r = 0; r < m; ++r) std::memcpy(out + r * V + column, part + r * count, count * sizeof(float));
    part += m * count;
    column += count;
  }
  return true;
}

// Every rank of a split model must hold a slice of the same model under the same options:
// rank 0's fingerprint against each rank's own, and every rank learns whether any differs.
void Model::agree_on_model(Comm& comm, const ModelConfig& cfg, const WeightSource& weights,
                           const ModelOptions& options) {
  const std::vector<std::string> problems = weights.problems(tensor_manifest(cfg));
  if (!problems.empty()) fail("{}: {}", weights.path.string(), problems.front());
  const uint64_t mine = model_fingerprint(cfg, weights, options);
  uint64_t root = mine;
  comm.broadcast(&root, sizeof root);
  if (comm.max(root != mine ? 1 : 0) == 0) return;
  if (root != mine) {
    fail(
        "tensor parallelism: rank {} opened a different model or different flags than rank 0 (fingerprint {:016x}, "
        "rank 0's {:016x}); every rank must run the same command on the same files",
        comm.rank(), mine, root);
  }
  fail(
      "tensor parallelism: another rank opened a different model or different flags than rank 0; every rank must "
      "run the same command on the same files");
}

bool Model::follower() const {
  return impl_->comm != nullptr && impl_->comm->rank() != 0;
}

int Model::ranks() const {
  return impl_->comm != nullptr ? impl_->comm->size() : 1;
}

// A follower's loop: rank 0's messages, each run on mirrors of rank 0's sequences, until the
// message that says rank 0's model is gone.
void Model::follow() const {
  if (!follower()) return;
  const Impl& m = *impl_;
  std::unordered_map<uint64_t, Sequence> mirrors;
  const auto mirror = [&](uint64_t id, uint64_t capacity) -> Sequence::State& {
    auto it = mirrors.find(id);
    if (it == mirrors.end()) it = mirrors.emplace(id, new_sequence(capacity)).first;
    return *it->second.state_;
  };
  StepMessage& msg = m.message;
  for (;;) {
    msg.receive(*m.comm);
    for (uint64_t id : msg.freed) mirrors.erase(id);
    if (msg.op == StepMessage::Op::Stop) return;
    try {
      if (msg.op == StepMessage::Op::Copy) {
        Sequence::State& dst = mirror(msg.dst, msg.dst_capacity);
        const Sequence::State& src = mirror(msg.src, msg.src_capacity);
        if (dst.cache.length() < msg.from) fail("tensor parallelism: a copy into a mirror shorter than rank 0's");
        dst.cache.truncate(msg.from);
        dst.cache.extend_from(src.cache, msg.to);
        continue;
      }
      if (msg.op != StepMessage::Op::Step || msg.parts.empty()) fail("tensor parallelism: an unknown message");
      Sequence::State& first = mirror(msg.parts[0].id, msg.parts[0].capacity);
      std::vector<Sequence::State::Part>& parts = first.batch;
      parts.clear();
      size_t row = 0;
      for (const StepMessage::Part& p : msg.parts) {
        Sequence::State& s = mirror(p.id, p.capacity);
        if (s.cache.length() < p.pos) fail("tensor parallelism: a step past the end of a mirror's cache");
        s.cache.truncate(p.pos);  // rank 0 cut or cleared the sequence since
        parts.push_back({&s, row, p.n, p.pos, p.out});
        row += p.n;
      }
      m.reserve(first.act, row);
      m.step(first.act, parts, msg.tokens.data(), row, msg.head ? first.logits.data() : nullptr);
    } catch (...) {
      m.abort_job();
    }
  }
}

}  // namespace nanoinfer
