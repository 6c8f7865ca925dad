#include "serve/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "nanoinfer/error.h"
#include "nanoinfer/generation_step.h"
#include "serve/logprob_stream.h"

namespace nanoinfer::serve {

using Clock = std::chrono::steady_clock;

// ---- Channel ------------------------------------------------------------------------------------

Channel::Piece Channel::take_locked() {
  Piece piece;
  piece.text.swap(pending_);
  piece.logprobs.swap(pending_logprobs_);
  piece.done = done_;
  return piece;
}

Channel::Piece Channel::next() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return !pending_.empty() || !pending_logprobs_.empty() || done_; });
  return take_locked();
}

std::optional<Channel::Piece> Channel::next_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [&] { return !pending_.empty() || !pending_logprobs_.empty() || done_; })) {
    return std::nullopt;
  }
  return take_locked();
}

bool Channel::wait_closed(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return cv_.wait_for(lock, timeout, [&] { return done_; });
}

void Channel::append(std::string_view text) {
  if (text.empty()) return;
  {
    std::lock_guard lock(mutex_);
    pending_.append(text);
  }
  cv_.notify_all();
}

void Channel::append(std::string_view text, std::vector<TokenLogprob>& logprobs) {
  if (text.empty() && logprobs.empty()) return;
  {
    std::lock_guard lock(mutex_);
    pending_.append(text);
    for (TokenLogprob& lp : logprobs) pending_logprobs_.push_back(std::move(lp));
  }
  logprobs.clear();
  cv_.notify_all();
}

void Channel::close(Outcome outcome, FinishReason finish, Usage usage, std::vector<int32_t> completion_ids,
                    std::string error) {
  {
    std::lock_guard lock(mutex_);
    completion_ids_ = std::move(completion_ids);
    outcome_ = outcome;
    finish_ = finish;
    usage_ = usage;
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
}

// ---- Scheduler ----------------------------------------------------------------------------------

struct Scheduler::Slot {
  Sequence seq;
  std::vector<int32_t> history;  // prompt + generated; the first seq.length() are in the cache
  bool busy = false;
  size_t prefilled = 0;    // prompt tokens in the cache: < job.prompt.size() while prefilling
  uint64_t last_used = 0;  // for choosing among free slots: least recently used first
  uint64_t scope = 0;      // the Job::cache_scope of the tokens the cache holds
  std::shared_ptr<Channel> channel;
  Job job;
  std::optional<GenerationStep> step;  // while busy
  // With logprobs: pairs the streamed text with its tokens' entries (serve/logprob_stream.h).
  std::optional<LogprobAligner> aligner;
  bool cut_by_stop_string = false;
  SpeculativeStep spec;  // with SchedulerOptions::make_drafter's drafter, kept for every request
  Clock::time_point submitted, last_token;
};

Scheduler::Scheduler(const Model& model, const Tokenizer& tokenizer, const SchedulerOptions& options, Metrics& metrics)
    : model_(model),
      tokenizer_(tokenizer),
      options_(options),
      metrics_(metrics),
      sample_vocab_(sampled_vocab(model.vocab_size(), tokenizer.vocab_size())),
      step_budget_(options.step_tokens, options.step_latency, options.prefill_chunk) {
  if (options_.parallel == 0) fail("--parallel must be >= 1");
  if (options_.prefill_chunk == 0) fail("--prefill-chunk must be >= 1");
  if (options_.step_tokens == 0) fail("--step-tokens must be >= 1");
  for (size_t i = 0; i < options_.parallel; ++i) {
    auto slot = std::make_unique<Slot>();
    slot->seq = model_.new_sequence();
    if (options_.make_drafter) slot->spec = SpeculativeStep(options_.make_drafter(), DraftLength::fixed(0));
    slots_.push_back(std::move(slot));
  }
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  shutdown();
}

std::shared_ptr<Channel> Scheduler::submit(Job job) {
  auto channel = std::make_shared<Channel>();
  {
    std::lock_guard lock(mutex_);
    // Every request from submit() to finish() counts, those the loop has taken from the queue
    // and not yet started included: `parallel` may run and `queue` wait, strictly.
    if (stopping_ || holding_ >= options_.parallel + options_.queue) return nullptr;
    ++holding_;
    queue_.push_back({std::move(job), channel, Clock::now()});
  }
  cv_.notify_all();
  return channel;
}

size_t Scheduler::queue_depth() const {
  std::lock_guard lock(mutex_);
  return holding_ > options_.parallel ? holding_ - options_.parallel : 0;
}

size_t Scheduler::holding() const {
  std::lock_guard lock(mutex_);
  return holding_;
}

void Scheduler::release() {
  {
    std::lock_guard lock(mutex_);
    --holding_;
  }
}

void Scheduler::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Scheduler::loop() {
  std::vector<Queued> admitted;
  Batch batch;
  while (admit(admitted)) {
    for (Queued& q : admitted) place(std::move(q));
    for (const auto& s : slots_) {
      if (s->busy && s->channel->cancelled()) finish(*s, Outcome::Cancelled, FinishReason::Stop);
    }
    plan_step(batch);
    if (!batch.seqs.empty()) run_step(batch);
  }

  // Shutting down: nothing more runs; every waiting handler is released.
  for (const auto& s : slots_) {
    if (s->busy) finish(*s, Outcome::Cancelled, FinishReason::Stop);
  }
  std::lock_guard lock(mutex_);
  for (Queued& q : queue_) q.channel->close(Outcome::Cancelled, FinishReason::Stop, {}, {});
  holding_ -= queue_.size();
  queue_.clear();
}

bool Scheduler::admit(std::vector<Queued>& admitted) {
  admitted.clear();
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || active_ > 0; });
  if (stopping_) return false;
  // Requests whose client left while they waited free their place at once.
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (!it->channel->cancelled()) {
      ++it;
      continue;
    }
    it->channel->close(Outcome::Cancelled, FinishReason::Stop, {}, {});
    --holding_;
    it = queue_.erase(it);
  }
  size_t free = 0;
  for (const auto& s : slots_) free += s->busy ? 0 : 1;
  while (free > 0 && !queue_.empty()) {
    admitted.push_back(std::move(queue_.front()));
    queue_.pop_front();
    --free;
  }
  return true;
}

void Scheduler::place(Queued q) {
  if (q.channel->cancelled()) {
    release();  // before the close: whoever waits on the channel sees the place free
    q.channel->close(Outcome::Cancelled, FinishReason::Stop, {}, {});
    return;
  }
  // The free slot whose cache shares the longest prefix with the prompt (at least one
  // prompt token is always pushed, for its logits); ties go to the least recently used.
  Slot* best = nullptr;
  size_t best_keep = 0;
  for (const auto& s : slots_) {
    if (s->busy) continue;
    const size_t keep = reusable(*s, q.job);
    if (!best || keep > best_keep || (keep == best_keep && s->last_used < best->last_used)) {
      best = s.get();
      best_keep = keep;
    }
  }
  best->last_used = ++tick_;
  start(*best, std::move(q));
}

// One forward pass per step: every decoding sequence's pending token (and its drafts), then
// the next chunk of each prompt being prefilled (at most prefill_chunk tokens each), as rows
// of one Model::decode call, so the weights are streamed once for both. While any sequence
// decodes, the prompt rows together are held to the step budget (at least one: what
// step_tokens leaves beside the decode rows, or with step_latency what keeps the step near
// that multiple of a plain decode step's time), timed around the pass.
void Scheduler::plan_step(Batch& batch) {
  batch.clear();
  for (const auto& s : slots_) {
    if (!s->busy || s->prefilled < s->job.prompt.size() || !draft(*s)) continue;
    const std::span<const int32_t> drafts = s->spec.drafts();
    batch.seqs.push_back(&s->seq);
    batch.tokens.push_back(s->history.back());
    batch.tokens.insert(batch.tokens.end(), drafts.begin(), drafts.end());
    batch.counts.push_back(1 + drafts.size());
    batch.outputs.push_back(batch.counts.back());
    batch.stepping.push_back(s.get());
  }
  batch.decode_rows = batch.tokens.size();
  size_t budget = step_budget_.prompt_rows(batch.decode_rows);  // prompt rows left for this step
  for (const auto& s : slots_) {
    if (budget == 0) break;
    if (!s->busy || s->prefilled >= s->job.prompt.size() || share_prefix(*s)) continue;
    const std::vector<int32_t>& prompt = s->job.prompt;
    const size_t n = std::min({options_.prefill_chunk, budget, prompt.size() - s->prefilled});
    budget -= n;
    batch.seqs.push_back(&s->seq);
    batch.tokens.insert(batch.tokens.end(), prompt.begin() + static_cast<ptrdiff_t>(s->prefilled),
                        prompt.begin() + static_cast<ptrdiff_t>(s->prefilled + n));
    batch.counts.push_back(n);
    // The last chunk's last row gives the first token.
    batch.outputs.push_back(s->prefilled + n == prompt.size() ? 1 : 0);
    batch.prefilling.push_back(s.get());
  }
}

void Scheduler::run_step(const Batch& batch) {
  const auto pass_start = std::chrono::steady_clock::now();
  try {
    model_.decode(batch.seqs, batch.tokens, batch.counts, batch.outputs);
  } catch (const std::exception& e) {
    for (Slot* s : batch.stepping) finish(*s, Outcome::Failed, FinishReason::Stop, e.what());
    for (Slot* s : batch.prefilling) {
      s->seq.cache().clear();
      s->prefilled = 0;
      finish(*s, Outcome::Failed, FinishReason::Stop, e.what());
    }
    return;
  }
  const size_t rows = batch.tokens.size(), prompt_rows = rows - batch.decode_rows;
  step_budget_.observe(batch.decode_rows, prompt_rows,
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - pass_start).count());
  steps_.fetch_add(1, std::memory_order_relaxed);
  rows_.fetch_add(rows, std::memory_order_relaxed);
  if (batch.decode_rows > 0 && !batch.prefilling.empty()) {
    mixed_steps_.fetch_add(1, std::memory_order_relaxed);
    last_mixed_prompt_rows_.store(prompt_rows, std::memory_order_relaxed);
    if (rows > max_mixed_rows_.load(std::memory_order_relaxed)) max_mixed_rows_.store(rows);
  }
  for (Slot* s : batch.stepping) accept_tokens(*s, s->seq.logits(), /*decoding=*/true);
  for (size_t i = 0; i < batch.prefilling.size(); ++i) {
    prefilled(*batch.prefilling[i], batch.counts[batch.stepping.size() + i]);
  }
}

// What a request adds to its step: OpenAI's penalties and logit bias, the grammar (last, so
// nothing can lift its mask), and the logprobs observer (the model's raw distribution).
void Scheduler::add_request_features(Slot& slot) {
  GenerationStep& step = *slot.step;
  const Job& job = slot.job;
  if (job.frequency_penalty != 0 || job.presence_penalty != 0) {
    step.add_processor(
        std::make_unique<FrequencyPresencePenalty>(sample_vocab_, job.frequency_penalty, job.presence_penalty));
  }
  if (!job.logit_bias.empty()) step.add_processor(std::make_unique<LogitBias>(job.logit_bias));
  if (job.grammar) step.add_processor(std::make_unique<GrammarProcessor>(*job.grammar, job.trie, job.eos_ids));
  if (job.top_logprobs >= 0) {
    slot.aligner.emplace();
    step.set_observer([this, aligner = &*slot.aligner, k = static_cast<size_t>(job.top_logprobs),
                       eos = job.eos_ids](const StepEvent& e) {
      if (std::find(eos.begin(), eos.end(), e.token) != eos.end()) return;  // not part of the completion
      const double lse = logsumexp_of(e.logits);
      TokenLogprob lp;
      lp.token = std::string(tokenizer_.token_bytes(e.token));
      lp.logprob = static_cast<double>(e.logits[static_cast<size_t>(e.token)]) - lse;
      if (k > 0) {
        for (const TokenCandidate& c : top_candidates(e.logits, k, lse)) {
          lp.top.emplace_back(std::string(tokenizer_.token_bytes(c.id)), c.logprob);
        }
      }
      aligner->add_token(std::move(lp));
    });
  }
}

void Scheduler::stream_text(Slot& slot, std::string_view text) {
  if (slot.aligner) {
    slot.aligner->add_text(text);
  } else {
    slot.channel->append(text);
  }
}

void Scheduler::start(Slot& slot, Queued q) {
  slot.busy = true;
  ++active_;
  slot.channel = std::move(q.channel);
  slot.job = std::move(q.job);
  slot.submitted = q.submitted;
  slot.aligner.reset();
  slot.cut_by_stop_string = false;
  try {
    slot.step.emplace(tokenizer_, sample_vocab_, slot.job.sampling,
                      StopRules{slot.job.max_tokens, slot.job.eos_ids, slot.job.stop});
    add_request_features(slot);
  } catch (const std::exception& e) {
    finish(slot, Outcome::Failed, FinishReason::Stop, e.what());
    return;
  }

  const std::vector<int32_t>& prompt = slot.job.prompt;
  const size_t keep = reusable(slot, slot.job);
  slot.scope = slot.job.cache_scope;
  slot.channel->cached_ = keep;
  slot.seq.cache().truncate(keep);
  slot.history = prompt;
  slot.prefilled = keep;  // the loop prefills the rest, a chunk per step
  slot.spec.restart(slot.job.sampling,
                    options_.draft_max ? DraftLength::fixed(*options_.draft_max) : DraftLength::adaptive());
}

namespace {

// How many of the first `limit` tokens of `prompt` are the first of `tokens`, of which only
// the first `available` count.
size_t prompt_prefix(std::span<const int32_t> tokens, size_t available, std::span<const int32_t> prompt, size_t limit) {
  return common_prefix(tokens.first(std::min(available, tokens.size())), prompt.first(limit));
}

}  // namespace

size_t Scheduler::reusable(const Slot& slot, const Job& job) const {
  if (!options_.prefix_cache || slot.scope != job.cache_scope) return 0;
  return prompt_prefix(slot.history, slot.seq.length(), job.prompt, job.prompt.size() - 1);
}

bool Scheduler::share_prefix(Slot& slot) {
  if (!options_.prefix_cache) return false;
  const std::vector<int32_t>& prompt = slot.job.prompt;
  const size_t limit = prompt.size() - 1;  // the last prompt token is always pushed, for its logits
  // The rows another slot's cache already holds for the prompt's next positions are copied
  // (from a slot of the same scope only: see Job::cache_scope).
  Slot* donor = nullptr;
  size_t best = slot.prefilled;
  for (const auto& s : slots_) {
    if (s.get() == &slot) continue;
    const size_t same = reusable(*s, slot.job);
    if (same > best) {
      best = same;
      donor = s.get();
    }
  }
  if (donor) {
    try {
      slot.seq.cache().extend_from(donor->seq.cache(), best);
      slot.channel->cached_ += best - slot.prefilled;
      slot.channel->shared_ += best - slot.prefilled;
      slot.prefilled = best;
    } catch (const std::exception&) {
      // No memory for the copy: the slot computes its rows itself, and fails there if it must.
    }
  }
  // A slot ahead in the same prompt (or as far, and earlier in the list) computes our next
  // positions in its own next chunk: wait for it and copy them rather than compute them twice.
  // The order is strict, so the slot ahead of every other never waits.
  bool earlier = true;
  for (const auto& s : slots_) {
    if (s.get() == &slot) {
      earlier = false;
      continue;
    }
    if (!s->busy || s->prefilled >= s->job.prompt.size() || s->scope != slot.scope) continue;
    if (s->prefilled < slot.prefilled || (s->prefilled == slot.prefilled && !earlier)) continue;
    if (prompt_prefix(s->job.prompt, s->job.prompt.size(), prompt, limit) > slot.prefilled) return true;
  }
  return false;
}

void Scheduler::prefilled(Slot& slot, size_t n) {
  const std::vector<int32_t>& prompt = slot.job.prompt;
  slot.prefilled += n;
  ++slot.channel->chunks_;
  if (slot.prefilled < prompt.size()) return;
  accept_tokens(slot, slot.seq.logits(), /*decoding=*/false);
  // A draft model prefills the prompt now, not in its first draft. (Finished: a failure, or
  // a request that ended with its first token, leaves it for the slot's next request.)
  if (slot.busy) {
    try {
      slot.spec.prefill(prompt);
    } catch (const std::exception& e) {
      finish(slot, Outcome::Failed, FinishReason::Stop, e.what());
    }
  }
}

// Up to k drafts for the token after the pending one, as many as the context and the token
// budget leave room for besides the step's own token.
bool Scheduler::draft(Slot& slot) {
  try {
    slot.spec.draft(slot.history, slot.seq.cache().capacity() - slot.seq.length() - 1,
                    static_cast<size_t>(slot.job.max_tokens) - slot.step->generated() - 1);
  } catch (const std::exception& e) {
    finish(slot, Outcome::Failed, FinishReason::Stop, e.what());
    return false;
  }
  return true;
}

// After each forward pass of a slot's sequence: its speculative step hands each row in turn
// to the generation step, which chooses the next token, streams its text to the channel and
// says whether the generation ended; rows after a rejected draft are dropped, from the cache
// too.
void Scheduler::accept_tokens(Slot& slot, std::span<const float> logits, bool decoding) {
  Channel& channel = *slot.channel;
  const auto on_choice = [&](size_t kept_before) {
    const Clock::time_point now = Clock::now();
    if (kept_before == 0) {
      metrics_.time_to_first_token(std::chrono::duration<double>(now - slot.submitted).count());
    } else {
      metrics_.time_per_token(std::chrono::duration<double>(now - slot.last_token).count());
    }
    slot.last_token = now;
  };
  SpeculativeStep::Verdict v;
  try {
    v = slot.spec.verify(
        *slot.step, logits, model_.vocab_size(), slot.history, slot.seq.cache(),
        [&](std::string_view t) { stream_text(slot, t); }, decoding, on_choice);
  } catch (const std::exception& e) {
    finish(slot, Outcome::Failed, FinishReason::Stop, e.what());
    return;
  }
  if (slot.aligner) {
    std::string text;
    std::vector<TokenLogprob> entries;
    slot.aligner->release(slot.step->held_bytes(), text, entries);
    channel.append(text, entries);
  }
  if (v.drafted > 0) {
    channel.drafted_ += v.drafted;
    channel.accepted_ += v.accepted;
    metrics_.add_drafts(v.drafted, v.accepted);
  }
  if (!v.end) return;
  const bool length = *v.end == StopReason::MaxTokens || *v.end == StopReason::ContextFull;
  slot.cut_by_stop_string = *v.end == StopReason::StopString;
  finish(slot, Outcome::Finished, length ? FinishReason::Length : FinishReason::Stop);
}

void Scheduler::finish(Slot& slot, Outcome outcome, FinishReason reason, std::string error) {
  const std::shared_ptr<Channel> owner = std::move(slot.channel);  // the handler may have let go
  Channel& channel = *owner;
  if (outcome == Outcome::Finished && slot.step) {
    // (slot.channel was moved to `owner`.)
    slot.step->finish([&](std::string_view t) { slot.aligner ? slot.aligner->add_text(t) : channel.append(t); });
    if (slot.aligner) {
      std::string text;
      std::vector<TokenLogprob> entries;
      slot.aligner->finish(slot.cut_by_stop_string, text, entries);
      channel.append(text, entries);
    }
  }
  const Usage usage{slot.job.prompt.size(), slot.step ? slot.step->generated() : 0};
  metrics_.add_tokens(usage.prompt_tokens, usage.completion_tokens);
  slot.step.reset();
  slot.busy = false;
  --active_;
  std::vector<int32_t> completion;
  if (slot.history.size() >= slot.job.prompt.size() && outcome == Outcome::Finished) {
    completion.assign(slot.history.begin() + static_cast<ptrdiff_t>(slot.job.prompt.size()), slot.history.end());
  }
  release();  // before the close: whoever waits on the channel sees the place free
  channel.close(outcome, reason, usage, std::move(completion), std::move(error));
}

}  // namespace nanoinfer::serve
