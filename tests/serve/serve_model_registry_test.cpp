// serve's model registry (serve/model_registry.h) with fake loaders: loads on first use, one
// load for concurrent requests, least-recently-used eviction of idle models only, draining a
// busy model for a waiting request, the wait's limit, failed loads, shutdown; every load and
// unload counted exactly.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nanoinfer/error.h"
#include "serve/access_log.h"
#include "serve/api.h"
#include "serve/metrics.h"
#include "serve/model_registry.h"

namespace nanoinfer::serve {
namespace {

using namespace std::chrono_literals;

// Counts what the fake loaders do, per model id.
struct LoadLog {
  std::mutex mutex;
  std::map<std::string, int> loads, unloads, stops;
  int live = 0;      // instances alive now
  int max_live = 0;  // the most alive at once
};

class FakeInstance final : public ModelInstance {
 public:
  FakeInstance(LoadLog& log, std::string id) : log_(log), id_(std::move(id)) {
    std::lock_guard lock(log_.mutex);
    ++log_.loads[id_];
    log_.max_live = std::max(log_.max_live, ++log_.live);
  }
  ~FakeInstance() override {
    std::lock_guard lock(log_.mutex);
    ++log_.unloads[id_];
    --log_.live;
  }
  void stop() override {
    std::lock_guard lock(log_.mutex);
    ++log_.stops[id_];
  }
  const std::string& id() const { return id_; }

 private:
  LoadLog& log_;
  std::string id_;
};

std::vector<RegistryModel> fake_models(LoadLog& log, std::vector<std::string> ids,
                                       std::chrono::milliseconds load_time = 0ms) {
  std::vector<RegistryModel> models;
  for (const std::string& id : ids) {
    models.push_back({id, [&log, id, load_time]() -> std::unique_ptr<ModelInstance> {
                        std::this_thread::sleep_for(load_time);
                        return std::make_unique<FakeInstance>(log, id);
                      }});
  }
  return models;
}

const std::string& lease_id(const ModelRegistry::Lease& lease) {
  return static_cast<FakeInstance&>(lease.instance()).id();
}

bool loaded(const ModelRegistry& r, size_t index) {
  return r.status()[index].loaded;
}

TEST(ModelRegistry, LoadsOnFirstUseAndFindsModelsById) {
  LoadLog log;
  ModelRegistry r(fake_models(log, {"a", "b", "c"}), {});
  EXPECT_EQ(r.find(""), 0u);
  EXPECT_EQ(r.find("b"), 1u);
  EXPECT_EQ(r.find("B"), std::nullopt);
  EXPECT_EQ(r.id_list(), "'a', 'b', 'c'");
  EXPECT_FALSE(loaded(r, 1));
  {
    ModelRegistry::Lease first = r.acquire(1);
    EXPECT_EQ(lease_id(first), "b");
    EXPECT_TRUE(first.waited());  // it waited for its load
    ModelRegistry::Lease second = r.acquire(1);
    EXPECT_FALSE(second.waited());
    EXPECT_EQ(&first.instance(), &second.instance());
    EXPECT_EQ(r.status()[1].active, 2u);
  }
  EXPECT_EQ(r.status()[1].active, 0u);
  EXPECT_TRUE(loaded(r, 1));  // without a limit nothing is unloaded
  r.acquire(0);
  r.acquire(2);
  EXPECT_EQ(log.loads, (std::map<std::string, int>{{"a", 1}, {"b", 1}, {"c", 1}}));
  EXPECT_TRUE(log.unloads.empty());
  EXPECT_EQ(r.status()[1].leases, 2u);
}

TEST(ModelRegistry, EvictsTheLeastRecentlyUsedIdleModel) {
  LoadLog log;
  std::vector<std::string> evictions;
  ModelRegistry r(fake_models(log, {"a", "b", "c"}),
                  {.max_loaded = 2, .on_evict = [&](const std::string& evicted, const std::string& for_model) {
                     evictions.push_back(evicted + "->" + for_model);
                   }});
  r.preload(0, std::make_unique<FakeInstance>(log, "a"));
  r.acquire(1);
  r.acquire(0);  // a is now more recent than b
  r.acquire(2);  // evicts b
  EXPECT_EQ(evictions, std::vector<std::string>{"b->c"});
  r.acquire(1);  // evicts a (c was used after it)
  EXPECT_EQ(evictions, (std::vector<std::string>{"b->c", "a->b"}));
  EXPECT_EQ(log.loads, (std::map<std::string, int>{{"a", 1}, {"b", 2}, {"c", 1}}));
  EXPECT_EQ(log.unloads, (std::map<std::string, int>{{"a", 1}, {"b", 1}}));
  EXPECT_EQ(log.max_live, 2);
  EXPECT_EQ(r.status()[1].unloads, 1u);
  EXPECT_EQ(r.status()[1].loads, 2u);
}

TEST(ModelRegistry, ConcurrentRequestsForAnUnloadedModelShareOneLoad) {
  LoadLog log;
  ModelRegistry r(fake_models(log, {"a", "b"}, 100ms), {});
  std::vector<std::future<bool>> waits;
  for (int i = 0; i < 4; ++i) {
    waits.push_back(std::async(std::launch::async, [&r] { return r.acquire(1).waited(); }));
  }
  for (auto& w : waits) EXPECT_TRUE(w.get());
  EXPECT_EQ(log.loads["b"], 1);
  EXPECT_EQ(r.status()[1].leases, 4u);
}

// --max-loaded 1 with a request running on a: a request for b waits, a is never unloaded under
// its lease, and a new request for a (a drains) waits for b's turn instead of starving b.
TEST(ModelRegistry, ABusyModelIsDrainedNotUnloadedUnderItsRequests) {
  LoadLog log;
  ModelRegistry r(fake_models(log, {"a", "b"}), {.max_loaded = 1});
  ModelRegistry::Lease running = r.acquire(0);
  std::atomic<bool> b_started{false};
  auto b = std::async(std::launch::async, [&] {
    ModelRegistry::Lease lease = r.acquire(1);
    b_started = true;
    std::this_thread::sleep_for(100ms);  // b's request runs
    return std::make_pair(lease_id(lease), lease.waited());
  });
  std::this_thread::sleep_for(150ms);
  EXPECT_FALSE(b_started);
  EXPECT_TRUE(loaded(r, 0));
  EXPECT_FALSE(loaded(r, 1));
  EXPECT_EQ(log.unloads["a"], 0);
  auto a_again = std::async(std::launch::async, [&] {
    ModelRegistry::Lease lease = r.acquire(0);
    return std::make_pair(lease_id(lease), static_cast<bool>(b_started));
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(r.status()[0].active, 1u);  // the new request for a did not start: a drains
  running.release();
  EXPECT_EQ(b.get(), std::make_pair(std::string("b"), true));
  // The second request for a ran after b's, on a loaded again.
  EXPECT_EQ(a_again.get(), std::make_pair(std::string("a"), true));
  EXPECT_EQ(log.loads, (std::map<std::string, int>{{"a", 2}, {"b", 1}}));
  EXPECT_EQ(log.unloads, (std::map<std::string, int>{{"a", 1}, {"b", 1}}));
  EXPECT_EQ(log.max_live, 1);
}

TEST(ModelRegistry, AWaitForASlotEndsIn503AndEndsTheDrain) {
  LoadLog log;
  ModelRegistry r(fake_models(log, {"a", "b"}), {.max_loaded = 1, .slot_wait = 150ms});
  ModelRegistry::Lease running = r.acquire(0);
  try {
    r.acquire(1);
    FAIL() << "acquired b while a ran under --max-loaded 1";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 503);
    EXPECT_EQ(e.code, "model_busy");
  }
  // Nobody waits for a slot any more: a takes requests at once again.
  EXPECT_FALSE(r.acquire(0).waited());
  EXPECT_EQ(log.loads, (std::map<std::string, int>{{"a", 1}}));
  EXPECT_TRUE(log.unloads.empty());
}

TEST(ModelRegistry, AFailedLoadIsA500AndTheNextRequestTriesAgain) {
  LoadLog log;
  int calls = 0;
  std::vector<RegistryModel> models = fake_models(log, {"a"});
  models.push_back({"broken", [&calls]() -> std::unique_ptr<ModelInstance> {
                      if (++calls == 1) fail("weights.safetensors: not found");
                      return nullptr;
                    }});
  ModelRegistry r(std::move(models), {.max_loaded = 1});
  r.acquire(0);
  for (const char* message : {"loading the model 'broken' failed: weights.safetensors: not found",
                              "loading the model 'broken' failed: the loader returned no model"}) {
    try {
      r.acquire(1);
      FAIL() << "acquired a model that does not load";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 500);
      EXPECT_EQ(e.code, "model_load_failed");
      EXPECT_STREQ(e.what(), message);
    }
  }
  EXPECT_EQ(calls, 2);
  EXPECT_FALSE(loaded(r, 1));
  // a was unloaded to make room for the first attempt; it loads again.
  EXPECT_EQ(lease_id(r.acquire(0)), "a");
  EXPECT_EQ(log.loads["a"], 2);
}

TEST(ModelRegistry, ShutdownStopsLoadedModelsAndEndsWaits) {
  LoadLog log;
  ModelRegistry r(fake_models(log, {"a", "b"}), {.max_loaded = 1});
  ModelRegistry::Lease running = r.acquire(0);
  auto waiting = std::async(std::launch::async, [&] {
    try {
      r.acquire(1);
      return std::string("acquired");
    } catch (const ApiError& e) {
      return e.code;
    }
  });
  std::this_thread::sleep_for(100ms);
  r.shutdown();
  EXPECT_EQ(waiting.get(), "shutting_down");
  EXPECT_EQ(log.stops, (std::map<std::string, int>{{"a", 1}}));
  EXPECT_EQ(log.loads["b"], 0);
}

TEST(ModelRegistry, AClientThatLeavesStopsWaiting) {
  LoadLog log;
  ModelRegistry r(fake_models(log, {"a", "b"}), {.max_loaded = 1});
  ModelRegistry::Lease running = r.acquire(0);
  int polls = 0;
  try {
    r.acquire(1, [&polls] { return ++polls == 3; });
    FAIL() << "acquired b while a ran";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 499);
  }
  EXPECT_EQ(polls, 3);
  EXPECT_FALSE(r.acquire(0).waited());  // the drain ended with the wait
}

TEST(ModelRegistry, RefusesDuplicateOrEmptyIds) {
  LoadLog log;
  EXPECT_THROW(ModelRegistry(fake_models(log, {"a", "a"}), {}), Error);
  EXPECT_THROW(ModelRegistry(fake_models(log, {""}), {}), Error);
  EXPECT_THROW(ModelRegistry({}, {}), Error);
}

// What the registry reports, as /v1/models, /metrics and the access log write it.
TEST(ModelRegistry, ListingMetricsAndLogLineNameTheModels) {
  const std::vector<ModelListing> listing{{"a", true}, {"b", false}};
  EXPECT_EQ(models_json(listing, 7),
            R"({"data":[{"created":7,"id":"a","loaded":true,"object":"model","owned_by":"nanoinfer"},)"
            R"({"created":7,"id":"b","loaded":false,"object":"model","owned_by":"nanoinfer"}],"object":"list"})");
  const std::string metrics =
      render_model_metrics({{.id = "a", .loaded = true, .active = 2, .loads = 3, .unloads = 1, .leases = 9},
                            {.id = "q\"\\\n", .loaded = false}});
  EXPECT_NE(metrics.find("\nnanoinfer_model_loaded{model=\"a\"} 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\nnanoinfer_model_active_requests{model=\"a\"} 2\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\nnanoinfer_model_requests_total{model=\"a\"} 9\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\nnanoinfer_model_loads_total{model=\"a\"} 3\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\nnanoinfer_model_unloads_total{model=\"a\"} 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\nnanoinfer_model_loaded{model=\"q\\\"\\\\\\n\"} 0\n"), std::string::npos) << metrics;
  EXPECT_EQ(access_line({.client = "127.0.0.1",
                         .method = "POST",
                         .path = "/v1/completions",
                         .status = 200,
                         .tokens = Usage{3, 4},
                         .seconds = 1.5,
                         .model = "my model",
                         .load_wait_ms = 830.4}),
            "nanoinfer: 127.0.0.1 POST /v1/completions 200 tokens 3+4 1.50 s model my\\x20model load_wait_ms 830\n");
}

}  // namespace
}  // namespace nanoinfer::serve
