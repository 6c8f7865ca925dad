// The models behind one `nanoinfer serve`: which are configured, which are loaded, and who is
// using each. A request takes a Lease on its model for as long as it runs; the lease loads the
// model on first use (concurrent requests for a model being loaded wait for that one load) and
// a model is unloaded only while no lease holds it.
//
// With `max_loaded` models loaded, a request for another one evicts the least recently used
// idle model. When every loaded model is busy, the least recently used of them is drained: it
// takes no new requests until its running ones end, then it is unloaded and the waiting model
// loads (without draining, a steady stream of requests to a loaded model would keep a request
// for another waiting forever). A request that waits for a slot longer than `slot_wait` gets
// 503 model_busy; the wait for a load in progress has no limit (loads end).
//
// The registry knows nothing of what a model is: a loader makes a ModelInstance, whose
// destructor is the unload. The server's instances hold the model and its scheduler.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nanoinfer::serve {

// A loaded model. Destroying it unloads it; stop() ends its work early (server shutdown).
class ModelInstance {
 public:
  virtual ~ModelInstance() = default;
  virtual void stop() {}
};

struct RegistryModel {
  std::string id;  // what a request's "model" names
  std::function<std::unique_ptr<ModelInstance>()> load;
};

struct RegistryOptions {
  size_t max_loaded = 0;  // models loaded at once; 0 = no limit
  // How long a request for an unloaded model waits for a loaded one to become idle.
  std::chrono::milliseconds slot_wait{std::chrono::seconds(120)};
  // Told of each model unloaded to make room for another (not of those freed at destruction).
  std::function<void(const std::string& evicted, const std::string& for_model)> on_evict;
};

class ModelRegistry {
 public:
  // Holds one model loaded while a request runs on it. Movable; released on destruction.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept { *this = std::move(o); }
    Lease& operator=(Lease&& o) noexcept;
    ~Lease() { release(); }
    ModelInstance& instance() const { return *instance_; }
    size_t index() const { return index_; }
    // Whether the request had to wait (for a load, or for a slot) before the model was usable,
    // and how long.
    bool waited() const { return waited_; }
    double wait_ms() const { return wait_ms_; }
    void release();

   private:
    friend class ModelRegistry;
    ModelRegistry* registry_ = nullptr;
    ModelInstance* instance_ = nullptr;
    size_t index_ = 0;
    bool waited_ = false;
    double wait_ms_ = 0;
  };

  // The first model is the default. Ids must be distinct and non-empty (checked: Error).
  ModelRegistry(std::vector<RegistryModel> models, RegistryOptions options);
  ~ModelRegistry();  // unloads every model (no lease may be left)
  ModelRegistry(const ModelRegistry&) = delete;
  ModelRegistry& operator=(const ModelRegistry&) = delete;

  size_t size() const { return models_.size(); }
  const std::string& id(size_t index) const { return models_[index].config.id; }
  // The index of the model with this id; "" names the default (0). nullopt: unknown.
  std::optional<size_t> find(std::string_view id) const;
  // The known ids, quoted and comma-separated, for error messages.
  std::string id_list() const;

  // Installs an instance loaded before the server started (the default model, opened by the
  // caller to fail early). Counts as a load.
  void preload(size_t index, std::unique_ptr<ModelInstance> instance);

  // Waits until model `index` is loaded and taking requests, loading it (and evicting
  // another first) if needed. Throws ApiError: 503 model_busy after slot_wait, 503
  // shutting_down after shutdown(), 500 model_load_failed with the loader's message, 499 when
  // `gone` (polled every 100 ms while waiting) says the client left.
  Lease acquire(size_t index, const std::function<bool()>& gone = {});

  struct Status {
    std::string id;
    bool loaded = false;
    size_t active = 0;     // leases held now
    uint64_t loads = 0;    // times loaded (preload included)
    uint64_t unloads = 0;  // times evicted
    uint64_t leases = 0;   // leases granted
  };
  std::vector<Status> status() const;
  // Calls `f` on each loaded instance, under the registry's lock (keep it short).
  void for_each_loaded(const std::function<void(size_t index, ModelInstance&)>& f) const;

  // Stops every loaded instance (ModelInstance::stop) and makes waiting and later acquires
  // throw 503 shutting_down. Instances stay until destruction (leases may still hold them).
  void shutdown();

 private:
  enum class State { Unloaded, Loading, Loaded, Unloading };
  struct Entry {
    RegistryModel config;
    std::unique_ptr<ModelInstance> instance;
    State state = State::Unloaded;
    bool draining = false;     // takes no new leases until it is unloaded
    bool making_room = false;  // a request is unloading another model to load this one
    size_t active = 0;
    uint64_t last_use = 0;  // the registry's clock at the last acquire or release
    uint64_t loads = 0, unloads = 0, leases = 0;
  };

  size_t occupied() const;  // loaded, loading or unloading: the slots max_loaded counts
  Entry* least_recent(bool idle_only);
  void load(std::unique_lock<std::mutex>& lock, Entry& e);
  void evict(std::unique_lock<std::mutex>& lock, Entry& victim, const Entry& for_model);
  void drain_for_waiters();
  void release(size_t index);

  std::vector<Entry> models_;
  RegistryOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t clock_ = 0;
  size_t slot_waiters_ = 0;  // acquires waiting for a slot to free
  bool stopping_ = false;
};

}  // namespace nanoinfer::serve
