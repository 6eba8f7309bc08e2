// Runs A and B of the compare view in the background (see CompareController.h).
#include "app/gui/CompareController.h"

#include "app/export/SettingNames.h"
#include "app/gui/SessionContext.h"
#include "app/gui/TaskRunner.h"
#include "core/io/case_cache.h"

namespace attnscope {
namespace {

QString runLabel(const HeadResult& r) {
  QString label = QStringLiteral("%1 %2").arg(QString::fromLatin1(precision_name(r.precision)),
                                              modeName(r.request.mode()));
  if (r.backend != "cpu") label += QStringLiteral(" · ") + QString::fromStdString(r.backend);
  return label;
}

// The view's grid of a result, kept alive by it.
SharedGrid gridOf(const std::shared_ptr<const HeadResult>& r, HeadView view) {
  return SharedGrid(r, &r->grid(view));
}

}  // namespace

// Owned by the runner's jobs (one at a time): the case and a stage cache per run.
struct CompareController::State {
  std::shared_ptr<const CaseData> data;
  HeadCache a, b;
};

CompareController::CompareController(SessionContext* context, QObject* parent)
    : QObject(parent), context_(context), state_(std::make_shared<State>()) {
  runner_ = new TaskRunner(QStringLiteral("attnscope-compare"), TaskPriority::normal, this);
  connect(context_, &SessionContext::inputsChanged, this, &CompareController::schedule);
  connect(context_, &SessionContext::caseChanged, this, [this] { window_ = MatrixWindow{}; });
}

CompareController::~CompareController() = default;

bool CompareController::busy() const {
  return runner_->busy();
}

void CompareController::setActive(bool active) {
  active_ = active;
  if (active_) {
    schedule();
  } else {
    runner_->cancel();
  }
}

void CompareController::setView(HeadView view) {
  if (view == view_) return;
  view_ = view;
  window_ = MatrixWindow{};
  schedule();
}

void CompareController::setWith(const CompareWith& with) {
  if (with == with_) return;
  with_ = with;
  schedule();
}

void CompareController::setWindow(const MatrixWindow& window, QSize pixels) {
  if (window == window_ && pixels == pixels_) return;
  window_ = window;
  pixels_ = pixels;
  // Matrices the views show whole at full resolution need no recompute for a zoom.
  const auto c = comparison_;
  if (c && c->aGrid && c->aGrid->complete() && (!c->bGrid || c->bGrid->complete())) return;
  schedule();
}

void CompareController::schedule() {
  const std::shared_ptr<CaseCache> cases = context_->cases();
  std::optional<HeadRequest> a = context_->currentRequest();
  if (!active_ || !cases || !a) return;
  a->reference = false;
  a->scores = ScoreSet{};
  if (is_score_view(view_)) a->scores[static_cast<size_t>(score_view_index(view_))] = true;
  a->window = window_;
  a->out_rows = std::max(1, pixels_.height());
  a->out_cols = std::max(1, pixels_.width());
  std::optional<HeadRequest> b;
  if (with_.kind != CompareWith::Kind::recorded) {
    b = *a;
    if (with_.kind == CompareWith::Kind::other_mode) {
      b->run.modes = {a->mode() == Mode::fused ? Mode::unfused : Mode::fused};
    } else if (with_.kind == CompareWith::Kind::precision) {
      b->run.precision = with_.precision;
    } else {
      b->run.backend = with_.backend;
    }
  }
  const HeadView view = view_;
  auto job = [state = state_, cases, path = context_->casePath().toStdString(), view, a = *a, b](
                 const TaskControl& control, QString* error) -> std::shared_ptr<const Comparison> {
    State& s = *state;
    Result<std::shared_ptr<const CaseData>> data = cases->get(path);
    if (!data) {
      *error = QString::fromStdString(data.error().message);
      return nullptr;
    }
    if (*data != s.data) {
      s.data = std::move(data).value();
      s.a.clear();
      s.b.clear();
    }
    const auto run = [&](HeadRequest request, HeadCache& cache) -> Result<HeadResult> {
      request.cancelled = [control] { return control.stale(); };
      Result<HeadResult> r = compute_head(*s.data, request, &cache);
      if (r) r->request.cancelled = nullptr;
      return r;
    };
    auto out = std::make_shared<Comparison>();
    out->view = view;
    try {
      Result<HeadResult> ra = run(a, s.a);
      if (!ra) {
        *error = QString::fromStdString(ra.error().message);
        return nullptr;
      }
      out->a = std::make_shared<const HeadResult>(std::move(ra).value());
      out->aGrid = gridOf(out->a, view);
      out->aLabel = runLabel(*out->a);
      if (b) {
        Result<HeadResult> rb = run(*b, s.b);
        if (rb) {
          out->b = std::make_shared<const HeadResult>(std::move(rb).value());
          out->bGrid = gridOf(out->b, view);
          out->bLabel = runLabel(*out->b);
        } else {
          out->problem = QString::fromStdString(rb.error().message);
        }
      } else {
        out->bLabel = QStringLiteral("recorded");
        Result<MatrixGrid> recorded = recorded_grid(*s.data, view, a.batch, a.head);
        if (recorded) {
          out->bGrid = std::make_shared<const MatrixGrid>(std::move(recorded).value());
        } else {
          out->problem = QString::fromStdString(recorded.error().message);
        }
      }
    } catch (const KernelCancelled&) {
      return nullptr;  // stale: dropped
    }
    if (out->bGrid) {
      Result<GridDifference> d =
          difference_grid(*out->aGrid, *out->bGrid, std::string(head_view_name(view)) + " A - B");
      if (d) {
        out->difference = std::move(d).value();
      } else {
        out->problem = QString::fromStdString(d.error().message);
      }
    }
    return out;
  };
  runner_->submit<Comparison>(std::move(job), [this](std::shared_ptr<const Comparison> c) {
    comparison_ = std::move(c);
    emit comparisonChanged();
  });
}

}  // namespace attnscope
