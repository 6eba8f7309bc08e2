// The GUI's background head recompute under load, without a window (QCoreApplication): a newer
// request stops the running job inside its CPU kernels (HeadRequest::cancelled), the stale job
// is dropped and the newer one applied; cancel() alone drops the running one. The head is
// S = 16384, D = 64 (fused forward + backward: 8.2 s on 2 threads at load 7); nothing is timed.
#include <gtest/gtest.h>

#include <QCoreApplication>
#include <QThread>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include "app/gui/ComputeWorker.h"
#include "tests/io/io_test_util.h"

namespace attnscope {
namespace {

using test::Sizes;

QCoreApplication& app() {
  static int argc = 1;
  static char name[] = "attnscope_compute_worker_tests";
  static char* argv[] = {name, nullptr};
  static QCoreApplication instance(argc, argv);
  return instance;
}

// Runs the event loop until done() (false after 10 minutes: a hang guard, not a timing check).
bool spin_until(const std::function<bool()>& done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents);
    QThread::msleep(2);
  }
  return true;
}

// A dump of one case /c: q, k, v [1, 1, seqlen, 64] in float32; null (after a failure) when
// it cannot be written or opened.
std::shared_ptr<const DumpReader> dump(const std::string& name, int64_t seqlen) {
  Sizes s;
  s.b = s.h = s.hk = 1;
  s.sq = s.sk = seqlen;
  s.d = s.dv = 64;
  const std::string path =
      test::write_one(name, "/c", test::make_case(s, DType::f32, Layout::bhsd, false));
  Result<DumpReader> reader = DumpReader::open(path);
  if (!reader) {
    ADD_FAILURE() << reader.error().message;
    return nullptr;
  }
  return std::make_shared<const DumpReader>(std::move(*reader));
}

HeadRequest request() {
  HeadRequest r;
  r.threads = 2;
  r.out_rows = r.out_cols = 64;  // pooled score grids, captured by the backward
  return r;
}

// What the worker's signals said, in order.
struct Events {
  std::vector<quint64> started, finished, dropped, failed;
  explicit Events(ComputeWorker& w) {
    QObject::connect(&w, &ComputeWorker::started, [this](quint64 id) { started.push_back(id); });
    QObject::connect(&w, &ComputeWorker::finished, [this](quint64 id) { finished.push_back(id); });
    QObject::connect(&w, &ComputeWorker::dropped, [this](quint64 id) { dropped.push_back(id); });
    QObject::connect(&w, &ComputeWorker::failed,
                     [this](quint64 id, const QString&, const QString&) { failed.push_back(id); });
  }
};

TEST(ComputeWorkerCancel, newer_request_stops_the_running_head_and_is_applied) {
  app();
  const auto big = dump("compute_worker_big.h5", 16384);
  const auto small = dump("compute_worker_small.h5", 200);
  ASSERT_TRUE(big && small);
  ComputeWorker worker;
  Events events(worker);
  const quint64 first =
      worker.submit(std::make_shared<CaseCache>(big), QStringLiteral("/c"), request());
  ASSERT_TRUE(spin_until([&] { return !events.started.empty(); }));
  QThread::msleep(500);  // inside the kernels by now (or still loading: either way stale)
  const auto resubmitted = std::chrono::steady_clock::now();
  const quint64 second =
      worker.submit(std::make_shared<CaseCache>(small), QStringLiteral("/c"), request());
  ASSERT_TRUE(spin_until([&] { return !events.finished.empty() && !events.dropped.empty(); }));
  std::printf(
      "newer request applied %.2f s after it was submitted (measured, not checked)\n",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - resubmitted).count());
  EXPECT_EQ(events.dropped, std::vector<quint64>{first});
  EXPECT_EQ(events.finished, std::vector<quint64>{second});
  EXPECT_TRUE(events.failed.empty());
  ASSERT_NE(worker.result(), nullptr);
  EXPECT_EQ(worker.result()->seqlen_q, 200);
  EXPECT_EQ(worker.result()->o.rows, 200);
  EXPECT_FALSE(worker.busy());
}

TEST(ComputeWorkerCancel, cancel_drops_the_running_head_without_a_result) {
  app();
  const auto big = dump("compute_worker_big_cancel.h5", 16384);
  ASSERT_TRUE(big);
  ComputeWorker worker;
  Events events(worker);
  const quint64 id =
      worker.submit(std::make_shared<CaseCache>(big), QStringLiteral("/c"), request());
  ASSERT_TRUE(spin_until([&] { return !events.started.empty(); }));
  QThread::msleep(500);
  worker.cancel();
  EXPECT_FALSE(worker.busy());
  ASSERT_TRUE(spin_until([&] { return !events.dropped.empty(); }));
  EXPECT_EQ(events.dropped, std::vector<quint64>{id});
  EXPECT_TRUE(events.finished.empty());
  EXPECT_TRUE(events.failed.empty());
  EXPECT_EQ(worker.result(), nullptr);
}

}  // namespace
}  // namespace attnscope
