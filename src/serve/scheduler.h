// The scheduler of `nanoinfer serve`: one thread owns the model and runs every generation.
//
// Requests wait in a bounded queue. Up to `parallel` of them hold a slot (a Sequence of the
// shared Model, with its own GenerationStep: the per-token step every front end runs, so a
// request samples, stops and streams exactly as `generate` would). Each scheduler step is one
// forward pass (one Model::decode call, which streams the weights once): every sequence done
// with its prompt advances by one token (continuous batching: requests join and leave between
// steps), and a new request's prompt rides in the same pass, a chunk per step. The chunk is at
// most `prefill_chunk` tokens, and while sequences decode the step holds at most `step_tokens`
// rows (decode rows first, then prompt rows, at least one), or with `step_latency` as many
// prompt rows as keep the step near that multiple of a decode-only step's measured time
// (StepBudget), so a long prompt arriving slows the running streams by a bounded share per
// token instead of stalling them for its prefill. Chunked prefill and batched decoding are bitwise
// what each sequence would compute alone, so a request's output does not depend on what else is
// running.
//
// With a drafter (SchedulerOptions::make_drafter: prompt lookup or a draft model, one per slot,
// kept across requests), each decoding sequence drafts up to k tokens before the step and
// pushes its pending token and drafts as rows of the same batched Model::decode call, which
// computes every row bitwise as the sequence alone would. Drafting and verification are
// Generator's own (SpeculativeStep, nanoinfer/speculative.h): the sequence's GenerationStep
// verifies the rows in order (greedy output unchanged, sampled drafts by rejection sampling)
// and the cache drops the rejected rows. k is fixed, or adaptive per sequence without timing
// (a batched step's time is not one sequence's).
//
// A free slot keeps the tokens its cache holds: a request that starts with them (a
// conversation that continues) is given that slot and prefills only the rest. The caches are
// also one prefix cache across slots (within a Job::cache_scope; none at all without
// SchedulerOptions::prefix_cache): before each chunk a prompt copies the K/V rows of
// its next positions from any slot, busy or free, whose tokens start the same way (a long
// system prompt is prefilled once for every request that starts with it), and a prompt whose
// next positions another slot is prefilling right now waits for them instead of computing
// them twice. The copies are bitwise what the forward pass writes, so outputs do not change.
//
// Text flows to the HTTP handler through a Channel per request; cancelling the channel (the
// client went away) ends the generation at the next step.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nanoinfer/generation_step.h"
#include "nanoinfer/grammar.h"
#include "nanoinfer/model.h"
#include "nanoinfer/sampler.h"
#include "nanoinfer/speculative.h"
#include "nanoinfer/tokenizer.h"
#include "serve/api.h"
#include "serve/metrics.h"
#include "serve/step_budget.h"

namespace nanoinfer::serve {

struct Job {
  std::vector<int32_t> prompt;  // non-empty; prompt + max_tokens fit the context
  int64_t max_tokens = 0;
  SamplerParams sampling;
  std::vector<int32_t> eos_ids;
  std::vector<std::string> stop;
  // Constrained decoding (the trie is the server's, built once) and the OpenAI processors.
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const VocabTrie> trie;
  double frequency_penalty = 0, presence_penalty = 0;
  std::map<int32_t, double> logit_bias;
  int top_logprobs = -1;  // -1: no logprobs
  // Its prompt reuses cached K/V rows (a free slot's, or copied from another slot's) only from
  // prompts of the same scope (the server gives each API key its own under per-key isolation).
  uint64_t cache_scope = 0;
};

enum class Outcome { Running, Finished, Cancelled, Failed };

// One request's stream of text, written by the scheduler and drained by the HTTP handler.
class Channel {
 public:
  struct Piece {
    std::string text;
    std::vector<TokenLogprob> logprobs;  // of the tokens since the last piece, when asked
    bool done = false;                   // nothing more will come; see outcome()
  };
  // Blocks until there is text or the generation ended; takes the pending text.
  Piece next();
  // As next(), waiting at most `timeout`: nullopt when nothing came (a handler checks its
  // client between waits).
  std::optional<Piece> next_for(std::chrono::milliseconds timeout);
  // The scheduler drops a cancelled request at its next step, or from the queue.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  // Waits at most `timeout` for the generation to end (a cancelled one ends at the scheduler's
  // next step); true once it has. Then what is valid once done (below) may be read on any
  // thread: the access log reads a cancelled request's counts this way.
  bool wait_closed(std::chrono::milliseconds timeout);

  // Valid once next() returned done.
  Outcome outcome() const { return outcome_; }
  FinishReason finish_reason() const { return finish_; }
  Usage usage() const { return usage_; }
  const std::string& error() const { return error_; }
  size_t cached_prompt_tokens() const { return cached_; }  // prompt tokens reused from a cache
  size_t shared_prompt_tokens() const { return shared_; }  // of those, copied from other slots
  size_t prefill_chunks() const { return chunks_; }        // forward passes its prompt took, once done
  // Speculative decoding, once done: tokens drafted for its verification rows, and kept.
  size_t drafted_tokens() const { return drafted_; }
  size_t accepted_tokens() const { return accepted_; }
  // The tokens generated and kept (an end-of-sequence id is not), once done.
  const std::vector<int32_t>& completion_ids() const { return completion_ids_; }

 private:
  Piece take_locked();  // with mutex_ held
  friend class Scheduler;
  void append(std::string_view text);
  // Text and the logprob entries of its tokens, taken together by the handler (one chunk).
  void append(std::string_view text, std::vector<TokenLogprob>& logprobs);
  void close(Outcome outcome, FinishReason finish, Usage usage, std::vector<int32_t> completion_ids,
             std::string error = {});

  std::mutex mutex_;
  std::condition_variable cv_;
  std::string pending_;
  std::vector<TokenLogprob> pending_logprobs_;
  bool done_ = false;
  std::atomic<bool> cancelled_{false};
  Outcome outcome_ = Outcome::Running;
  FinishReason finish_ = FinishReason::Stop;
  Usage usage_;
  std::string error_;
  size_t cached_ = 0;
  size_t shared_ = 0;
  size_t chunks_ = 0;
  size_t drafted_ = 0, accepted_ = 0;
  std::vector<int32_t> completion_ids_;
};

struct SchedulerOptions {
  size_t parallel = 4;  // sequences generated together (>= 1)
  size_t queue = 64;    // requests waiting for a slot; more are refused
  // Prompt tokens of one prompt a step carries (>= 1): with no sequence decoding, a prompt is
  // prefilled in chunks this long.
  size_t prefill_chunk = 512;
  // Rows one step carries while sequences decode (>= 1): their decode rows (and drafts), then
  // prompt rows up to this count, at least one. Each step is one forward pass, so this bounds
  // what a prompt arriving adds to the running streams' inter-token time (docs/PERFORMANCE.md,
  // "Serving").
  size_t step_tokens = 8;
  // > 0: while a prompt prefills beside decoding sequences, its rows per step are set from
  // measured step times so a step takes about this many times a decode-only step (StepBudget,
  // serve/step_budget.h); `step_tokens` then only sets the first such step's rows. 0: fixed.
  double step_latency = 0;
  // Speculative decoding: makes each slot's drafter, once (null: plain decoding), and the
  // tokens drafted per pass (unset: DraftLength::adaptive(), untimed).
  std::function<std::unique_ptr<Drafter>()> make_drafter;
  std::optional<size_t> draft_max;
  // false: no prompt reuses another's cached rows, nor its slot's previous ones.
  bool prefix_cache = true;
};

class Scheduler {
 public:
  // `model`, `tokenizer` and `metrics` must outlive the scheduler. Starts the thread.
  Scheduler(const Model& model, const Tokenizer& tokenizer, const SchedulerOptions& options, Metrics& metrics);
  ~Scheduler();  // shutdown()

  // Queues a job; nullptr when the queue is full or the scheduler is shut down.
  std::shared_ptr<Channel> submit(Job job);
  // Cancels queued and running requests (their channels close as Cancelled) and joins.
  void shutdown();

  // Requests accepted beyond the `parallel` that may run: those that wait (<= queue).
  size_t queue_depth() const;
  size_t active() const { return active_; }
  // Requests accepted and not yet finished (queued, starting or running): at most
  // parallel + queue, the bound submit() keeps.
  size_t holding() const;

  // Work counters: steps run (each one forward pass), rows they carried, steps that carried
  // both decode rows and prompt rows, and the most rows such a step carried.
  uint64_t steps() const { return steps_; }
  uint64_t rows() const { return rows_; }
  uint64_t mixed_steps() const { return mixed_steps_; }
  size_t max_mixed_rows() const { return max_mixed_rows_; }
  // Prompt rows the most recent mixed step carried (0 before any).
  size_t last_mixed_prompt_rows() const { return last_mixed_prompt_rows_; }

 private:
  struct Slot;
  struct Queued {
    Job job;
    std::shared_ptr<Channel> channel;
    std::chrono::steady_clock::time_point submitted;
  };
  // The rows of one step's forward pass (one Model::decode call), planned anew each step.
  struct Batch {
    std::vector<Sequence*> seqs;
    std::vector<int32_t> tokens;
    std::vector<size_t> counts, outputs;      // Model::decode's, per sequence
    std::vector<Slot*> stepping, prefilling;  // the decoding sequences' slots, then the prompts'
    size_t decode_rows = 0;                   // the first rows of `tokens`: the decoding sequences'
    void clear() {
      seqs.clear();
      tokens.clear();
      counts.clear();
      outputs.clear();
      stepping.clear();
      prefilling.clear();
      decode_rows = 0;
    }
  };
  // The scheduler thread: each step admits requests, plans a pass and runs it.
  void loop();
  // Waits for work; takes from the queue as many requests as slots are free (dropping those
  // whose client left). False when shutting down.
  bool admit(std::vector<Queued>& admitted);
  // Starts an admitted request in the free slot whose cache holds the most of its prompt.
  void place(Queued q);
  // The step's rows: every decoding sequence's pending token and drafts, then prompt chunks
  // within the step budget.
  void plan_step(Batch& batch);
  // The forward pass of a planned step, and what each sequence makes of its rows.
  void run_step(const Batch& batch);
  void start(Slot& slot, Queued q);
  // After a step that carried n more tokens of its prompt; the last chunk's logits give the
  // first token.
  void prefilled(Slot& slot, size_t n);
  // Before a chunk: copies the rows of the prompt's next positions that other slots' caches
  // hold; true when another slot prefilling the same prompt will compute the next ones (this
  // slot then waits a step instead of computing them too).
  bool share_prefix(Slot& slot);
  // How many leading tokens of `job`'s prompt (at most all but its last) `slot`'s cache holds
  // and the job may reuse: none across scopes or without the prefix cache.
  size_t reusable(const Slot& slot, const Job& job) const;
  // Its next token from each row of `logits` (one, or a verification pass's: see the top),
  // after a decode step (`decoding`) or its prompt's last chunk.
  void accept_tokens(Slot& slot, std::span<const float> logits, bool decoding);
  bool draft(Slot& slot);  // drafts for the slot's next pass; false when the drafter failed (slot
                           // finished)
  void add_request_features(Slot& slot);
  // The text a slot's step streams: to its channel, or through its logprob aligner.
  void stream_text(Slot& slot, std::string_view text);
  void finish(Slot& slot, Outcome outcome, FinishReason finish, std::string error = {});
  void release();  // one request of holding_ is done

  const Model& model_;
  const Tokenizer& tokenizer_;
  SchedulerOptions options_;
  Metrics& metrics_;
  int64_t sample_vocab_;
  std::vector<std::unique_ptr<Slot>> slots_;
  uint64_t tick_ = 0;  // the scheduler thread's: place() stamps Slot::last_used with it

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;
  size_t holding_ = 0;  // see holding(); under mutex_
  bool stopping_ = false;
  std::atomic<size_t> active_{0};
  std::atomic<uint64_t> steps_{0}, rows_{0}, mixed_steps_{0};
  std::atomic<size_t> max_mixed_rows_{0}, last_mixed_prompt_rows_{0};
  StepBudget step_budget_;  // the scheduler thread's
  std::thread thread_;
};

}  // namespace nanoinfer::serve
