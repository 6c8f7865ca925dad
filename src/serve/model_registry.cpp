#include "serve/model_registry.h"

#include <fmt/format.h>

#include "nanoinfer/error.h"
#include "serve/api.h"

namespace nanoinfer::serve {

ModelRegistry::Lease& ModelRegistry::Lease::operator=(Lease&& o) noexcept {
  if (this == &o) return *this;
  release();
  registry_ = o.registry_;
  instance_ = o.instance_;
  index_ = o.index_;
  waited_ = o.waited_;
  wait_ms_ = o.wait_ms_;
  o.registry_ = nullptr;
  o.instance_ = nullptr;
  return *this;
}

void ModelRegistry::Lease::release() {
  if (registry_ == nullptr) return;
  registry_->release(index_);
  registry_ = nullptr;
  instance_ = nullptr;
}

ModelRegistry::ModelRegistry(std::vector<RegistryModel> models, RegistryOptions options)
    : options_(std::move(options)) {
  if (models.empty()) fail("a server needs at least one model");
  for (RegistryModel& m : models) {
    if (m.id.empty()) fail("a served model's id is empty");
    for (const Entry& e : models_) {
      if (e.config.id == m.id) fail("two served models are named '{}': give each its own id (--model-id)", m.id);
    }
    models_.push_back(Entry{.config = std::move(m)});
  }
}

ModelRegistry::~ModelRegistry() = default;

std::optional<size_t> ModelRegistry::find(std::string_view id) const {
  if (id.empty()) return 0;
  for (size_t i = 0; i < models_.size(); ++i) {
    if (models_[i].config.id == id) return i;
  }
  return std::nullopt;
}

std::string ModelRegistry::id_list() const {
  std::string out;
  for (const Entry& e : models_) out += fmt::format("{}'{}'", out.empty() ? "" : ", ", e.config.id);
  return out;
}

void ModelRegistry::preload(size_t index, std::unique_ptr<ModelInstance> instance) {
  std::lock_guard lock(mutex_);
  Entry& e = models_.at(index);
  if (e.state != State::Unloaded) fail("the model '{}' is already loaded", e.config.id);
  if (options_.max_loaded != 0 && occupied() >= options_.max_loaded) {
    fail("preloading '{}' would load more than {} models", e.config.id, options_.max_loaded);
  }
  e.instance = std::move(instance);
  e.state = State::Loaded;
  ++e.loads;
}

size_t ModelRegistry::occupied() const {
  size_t n = 0;
  for (const Entry& e : models_) n += e.state != State::Unloaded;
  return n;
}

ModelRegistry::Entry* ModelRegistry::least_recent(bool idle_only) {
  Entry* best = nullptr;
  for (Entry& e : models_) {
    if (e.state != State::Loaded || (idle_only && e.active > 0)) continue;
    if (best == nullptr || e.last_use < best->last_use) best = &e;
  }
  return best;
}

// Called with the lock held; returns with it held, the model loaded or the load's error thrown.
void ModelRegistry::load(std::unique_lock<std::mutex>& lock, Entry& e) {
  e.state = State::Loading;
  lock.unlock();
  std::unique_ptr<ModelInstance> instance;
  std::string error = "the loader returned no model";
  try {
    instance = e.config.load();
  } catch (const std::exception& ex) {
    error = ex.what();
  }
  lock.lock();
  changed_.notify_all();
  if (!instance) {
    e.state = State::Unloaded;
    throw ApiError(500, "server_error", "model_load_failed",
                   fmt::format("loading the model '{}' failed: {}", e.config.id, error));
  }
  if (stopping_) instance->stop();
  e.instance = std::move(instance);
  e.state = State::Loaded;
  ++e.loads;
}

// Called with the lock held; the victim is idle. Its slot stays counted while it unloads, so no
// other request loads a model into it meanwhile.
void ModelRegistry::evict(std::unique_lock<std::mutex>& lock, Entry& victim, const Entry& for_model) {
  victim.state = State::Unloading;
  std::unique_ptr<ModelInstance> instance = std::move(victim.instance);
  lock.unlock();
  if (options_.on_evict) options_.on_evict(victim.config.id, for_model.config.id);
  instance.reset();
  lock.lock();
  victim.state = State::Unloaded;
  victim.draining = false;
  ++victim.unloads;
  changed_.notify_all();
}

// Every slot is taken by a busy model: the least recently used one takes no new requests, so
// it becomes idle once its running requests end. One model drains at a time.
void ModelRegistry::drain_for_waiters() {
  for (const Entry& e : models_) {
    if (e.draining) return;
  }
  if (Entry* victim = least_recent(/*idle_only=*/false)) victim->draining = true;
}

ModelRegistry::Lease ModelRegistry::acquire(size_t index, const std::function<bool()>& gone) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + options_.slot_wait;
  std::unique_lock lock(mutex_);
  Entry& e = models_.at(index);
  bool waited = false;
  // A request waiting for a slot keeps a model draining; the last one to leave ends the drain.
  struct SlotWait {
    ModelRegistry& r;
    bool counted = false;
    ~SlotWait() {
      if (!counted || --r.slot_waiters_ > 0) return;
      for (Entry& m : r.models_) m.draining = false;
      r.changed_.notify_all();
    }
  } slot_wait{*this};
  while (!(e.state == State::Loaded && !e.draining)) {
    if (stopping_) throw ApiError(503, "server_error", "shutting_down", "the server is shutting down");
    if (e.state == State::Unloaded && !e.making_room) {
      waited = true;
      if (options_.max_loaded == 0 || occupied() < options_.max_loaded) {
        load(lock, e);
        continue;
      }
      if (Entry* victim = least_recent(/*idle_only=*/true)) {
        e.making_room = true;
        evict(lock, *victim, e);
        e.making_room = false;
        continue;
      }
      if (!slot_wait.counted) {
        slot_wait.counted = true;
        ++slot_waiters_;
      }
      drain_for_waiters();
    }
    // A load in progress is waited for without limit; a slot or a drain, up to slot_wait.
    if (e.state != State::Loading && std::chrono::steady_clock::now() >= deadline) {
      throw ApiError(503, "server_error", "model_busy",
                     fmt::format("the model '{}' is not loaded and the {} loaded model(s) stayed busy for {} s; "
                                 "retry later",
                                 e.config.id, occupied(), options_.slot_wait.count() / 1000.0));
    }
    waited = true;
    changed_.wait_for(lock, std::chrono::milliseconds(100));
    if (gone && gone()) throw ApiError(499, "invalid_request_error", "client_gone", "the client left");
  }
  ++e.active;
  ++e.leases;
  e.last_use = ++clock_;
  Lease lease;
  lease.registry_ = this;
  lease.instance_ = e.instance.get();
  lease.index_ = index;
  lease.waited_ = waited;
  lease.wait_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return lease;
}

void ModelRegistry::release(size_t index) {
  std::lock_guard lock(mutex_);
  Entry& e = models_[index];
  --e.active;
  e.last_use = ++clock_;
  changed_.notify_all();
}

std::vector<ModelRegistry::Status> ModelRegistry::status() const {
  std::lock_guard lock(mutex_);
  std::vector<Status> out;
  for (const Entry& e : models_) {
    out.push_back(Status{.id = e.config.id,
                         .loaded = e.state == State::Loaded,
                         .active = e.active,
                         .loads = e.loads,
                         .unloads = e.unloads,
                         .leases = e.leases});
  }
  return out;
}

void ModelRegistry::for_each_loaded(const std::function<void(size_t index, ModelInstance&)>& f) const {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < models_.size(); ++i) {
    if (models_[i].state == State::Loaded) f(i, *models_[i].instance);
  }
}

void ModelRegistry::shutdown() {
  std::lock_guard lock(mutex_);
  stopping_ = true;
  for (Entry& e : models_) {
    if (e.state == State::Loaded) e.instance->stop();
  }
  changed_.notify_all();
}

}  // namespace nanoinfer::serve
