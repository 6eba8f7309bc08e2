// Slider-change-to-render bench of the GUI (see GuiBench.h).
#include "app/gui/GuiBench.h"

#include <sys/resource.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "app/gui/ComputeWorker.h"
#include "app/gui/MainWindow.h"
#include "app/gui/ScanController.h"
#include "app/gui/SessionContext.h"
#include "core/io/hdf5_dump.h"

namespace attnscope {
namespace {

constexpr int kTimeoutMs = 120000;

// q, k, v, dO ~ U(-1, 1) from a fixed seed, one head.
Status writeBenchDump(const std::string& path, int64_t s, int64_t d) {
  std::mt19937_64 rng(20240611);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const std::vector<int64_t> shape = {1, 1, s, d};
  CaseData c;
  c.info.config.name = "GUI bench S" + std::to_string(s) + " D" + std::to_string(d);
  c.info.config.dtype = "float32";
  for (const char* name : {"q", "k", "v", "do"}) {
    std::vector<double> values(static_cast<size_t>(s * d));
    for (double& x : values) x = u(rng);
    c.tensors[name] = HostTensor::from_double(DType::f32, shape, values);
  }
  Result<DumpWriter> writer = DumpWriter::create(path);
  if (!writer) return writer.error();
  if (Status st = writer->write_case("/bench", c); !st) return st;
  return writer->close();
}

// The real-size layer of the open bench: B=1, H=32, Hkv=8 (GQA), S, D=128, bf16, causal, as a
// Llama-class layer records it; q, k, v, dO ~ U(-1, 1) from a fixed seed.
Status writeLayerDump(const std::string& path, int64_t s) {
  constexpr int64_t kHeads = 32, kKvHeads = 8, kHeadDim = 128;
  std::mt19937_64 rng(20261206);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  CaseData c;
  c.info.config.name = "open bench layer S" + std::to_string(s);
  c.info.config.dtype = "bfloat16";
  c.info.config.causal = true;
  for (const char* name : {"q", "k", "v", "do"}) {
    const bool kv = name[0] == 'k' || name[0] == 'v';
    const std::vector<int64_t> shape = {1, kv ? kKvHeads : kHeads, s, kHeadDim};
    std::vector<float> values(static_cast<size_t>(shape[1] * s * kHeadDim));
    for (float& x : values) x = u(rng);
    c.tensors[name] = HostTensor::from_float(DType::bf16, shape, values);
  }
  Result<DumpWriter> writer = DumpWriter::create(path);
  if (!writer) return writer.error();
  if (Status st = writer->write_case("/layer_00", c); !st) return st;
  return writer->close();
}

double peakRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Processes events until `done` holds; false on timeout. Sleeps between events like the
// application's own event loop (a busy loop would take a core from the compute), woken at least
// every 50 ms by a timer to check the timeout.
template <typename F>
bool pump(F done) {
  QElapsedTimer t;
  t.start();
  QTimer wake;
  wake.start(50);
  while (!done()) {
    if (t.elapsed() > kTimeoutMs) return false;
    QCoreApplication::processEvents(QEventLoop::WaitForMoreEvents);
  }
  return true;
}

// Counts the events the application delivers, and the paint events per widget class.
class EventCounter : public QObject {
 public:
  int64_t events = 0;
  std::map<std::string, int> painted;

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override {
    ++events;
    if (event->type() == QEvent::Paint) ++painted[watched->metaObject()->className()];
    return false;
  }
};

// Runs the event loop until a round delivers no event: the queued replots have run and every
// widget they touched has painted itself (what the screen shows next). Returns the rounds.
int drainEvents(EventCounter& counter) {
  int rounds = 0;
  for (int64_t before = -1; before != counter.events && rounds < 100; ++rounds) {
    before = counter.events;
    QCoreApplication::processEvents();
  }
  return rounds;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int runGuiBench(const GuiBenchOptions& options) {
  QTemporaryDir dir;
  const std::string path = dir.filePath(QStringLiteral("bench.h5")).toStdString();
  if (Status st = writeBenchDump(path, options.seqlen, options.head_dim); !st) {
    std::fprintf(stderr, "attnscope --bench-gui: %s\n", st.error().describe().c_str());
    return 1;
  }
  MainWindow window;
  window.setErrorHandler([](const QString& title, const QString& message, const QString&) {
    std::fprintf(stderr, "attnscope --bench-gui: %s: %s\n", qPrintable(title), qPrintable(message));
  });
  window.resize(1500, 950);
  window.show();
  SessionContext* ctx = window.context();
  if (!window.openTarget({QString::fromStdString(path), QStringLiteral("/bench")})) return 1;
  // The dump's case scan runs once per opened file: measured runs start after it.
  const auto settled = [&] {
    return ctx->result() && !window.worker()->busy() && !window.scans()->busy();
  };
  if (!pump(settled)) return 1;
  window.grab();

  std::printf("attnscope --bench-gui: S=%lld D=%lld, %d runs, %d hardware threads, platform %s\n",
              static_cast<long long>(options.seqlen), static_cast<long long>(options.head_dim),
              options.runs, QThread::idealThreadCount(), qPrintable(QApplication::platformName()));
  const MatrixGrid& s = *ctx->result()->scoreGrid();
  std::printf("score grids: %s %lld x %lld cells\n", s.pooled ? "pooled to" : "full resolution,",
              static_cast<long long>(s.rows), static_cast<long long>(s.cols));
  // Per run: until the shown view (S) is redrawn (what scrubbing sees: the forward's statistics
  // handed over first), until every view is (the whole head's result); each with its compute,
  // wait+apply (queue, compute, delivery and every panel's update) and render (queued replots,
  // painting).
  struct Latency {
    std::vector<double> total, compute, applied, render;
    void add(double totalMs, double computeMs, double appliedMs) {
      total.push_back(totalMs);
      compute.push_back(computeMs);
      applied.push_back(appliedMs - computeMs);
      render.push_back(totalMs - appliedMs);
    }
    void print(const char* what) const {
      std::printf(
          "median slider->%s %.1f ms (compute %.1f ms, wait+apply %.1f ms, render %.1f ms)\n", what,
          median(total), median(compute), median(applied), median(render));
    }
  };
  Latency shown, all;
  std::vector<double> grab;
  std::map<std::string, std::vector<double>> phases;
  QElapsedTimer t;
  double appliedAt = 0;
  const auto stamp = [&] { appliedAt = static_cast<double>(t.nsecsElapsed()) / 1e6; };
  QObject::connect(window.worker(), &ComputeWorker::finished, &window, stamp);
  QObject::connect(window.worker(), &ComputeWorker::forwardReady, &window, stamp);
  const auto elapsed = [&] { return static_cast<double>(t.nsecsElapsed()) / 1e6; };
  EventCounter counter;
  qApp->installEventFilter(&counter);
  drainEvents(counter);
  for (int run = 0; run < options.runs; ++run) {
    const double scale = ctx->defaultScale() * (run % 2 ? 0.5 : 2.0) * (1.0 + 0.01 * run);
    t.start();
    ctx->setScale(scale);  // what a slider move does
    counter.painted.clear();
    if (!pump([&] { return ctx->result() && ctx->result()->scale == scale; })) return 1;
    drainEvents(counter);  // queued replots, then the repaint of every widget that changed
    const std::shared_ptr<const HeadResult> first = ctx->result();
    shown.add(elapsed(), first->elapsed_ms, appliedAt);
    if (!pump([&] { return settled() && ctx->result()->gradients; })) return 1;
    drainEvents(counter);
    const HeadResult& r = *ctx->result();
    all.add(elapsed(), r.elapsed_ms, appliedAt);
    std::string paints;
    for (const auto& [cls, n] : counter.painted) paints += " " + cls + "x" + std::to_string(n);
    // For comparison: a repaint of the whole window, unchanged widgets included.
    QElapsedTimer g;
    g.start();
    window.grab();
    grab.push_back(static_cast<double>(g.nsecsElapsed()) / 1e6);
    std::string split;
    for (const HeadPhase& ph : r.phases) {
      phases[ph.name].push_back(ph.ms);
      split += " " + std::string(ph.name) + " " + std::to_string(static_cast<int>(ph.ms + 0.5));
    }
    std::printf(
        "run %2d: shown view %6.1f ms, every view %6.1f ms (compute%s; render %.1f ms; "
        "painted:%s)\n",
        run, shown.total.back(), all.total.back(), split.c_str(), all.render.back(),
        paints.c_str());
    std::fflush(stdout);
  }
  shown.print("shown view (S) redrawn");
  all.print("every view ready");
  std::printf("median full-window repaint (grab, not part of the above) %.1f ms\n", median(grab));
  for (const auto& [name, ms] : phases) {
    std::printf("  median %-16s %7.1f ms over %zu runs\n", name.c_str(), median(ms), ms.size());
  }
  return 0;
}

int runOpenBench(int64_t seqlen) {
  QTemporaryDir dir;
  const std::string path = dir.filePath(QStringLiteral("layer.h5")).toStdString();
  if (Status st = writeLayerDump(path, seqlen); !st) {
    std::fprintf(stderr, "attnscope --bench-open: %s\n", st.error().describe().c_str());
    return 1;
  }
  const double before = peakRssMb();
  QElapsedTimer t;
  t.start();
  MainWindow window;
  window.setErrorHandler([](const QString& title, const QString& message, const QString&) {
    std::fprintf(stderr, "attnscope --bench-open: %s: %s\n", qPrintable(title),
                 qPrintable(message));
  });
  window.resize(1366, 728);
  window.show();
  SessionContext* ctx = window.context();
  if (!window.openTarget({QString::fromStdString(path), QStringLiteral("/layer_00")})) return 1;
  const double read = static_cast<double>(t.nsecsElapsed()) / 1e6;
  // The first heatmap: the S tab drawn from the first result (scores and row statistics).
  if (!pump([&] { return ctx->result() != nullptr; })) return 1;
  EventCounter counter;
  qApp->installEventFilter(&counter);
  drainEvents(counter);
  const double first = static_cast<double>(t.nsecsElapsed()) / 1e6;
  if (!pump([&] { return ctx->result()->gradients && !window.worker()->busy(); })) return 1;
  drainEvents(counter);
  const double every = static_cast<double>(t.nsecsElapsed()) / 1e6;
  const double viewPeak = peakRssMb();
  if (!pump([&] { return !window.scans()->busy(); })) return 1;
  const double scanned = static_cast<double>(t.nsecsElapsed()) / 1e6;
  std::printf(
      "attnscope --bench-open: B=1 H=32 Hkv=8 S=%lld D=128 bf16 causal, %d hardware threads, "
      "platform %s\n"
      "case read (open, probe, select) %.0f ms\n"
      "first heatmap drawn             %.0f ms (%.0f ms after the case was read)\n"
      "every view of head 0 ready      %.0f ms (peak resident memory %.0f MB)\n"
      "case scan (findings, badge)     %.0f ms\n"
      "peak resident memory            %.0f MB (%.0f MB before the window)\n",
      static_cast<long long>(seqlen), QThread::idealThreadCount(),
      qPrintable(QApplication::platformName()), read, first, first - read, every, viewPeak, scanned,
      peakRssMb(), before);
  return 0;
}

}  // namespace attnscope
