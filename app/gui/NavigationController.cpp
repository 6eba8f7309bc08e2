// Go to a cell, the whole matrix, and step / layer navigation (see NavigationController.h).
#include "app/gui/NavigationController.h"

#include <QAction>
#include <QMenu>
#include <algorithm>

#include "app/gui/GoToDialog.h"
#include "app/gui/SessionContext.h"

namespace attnscope {
namespace {

// A go-to shows the cell with this many elements on each side (fewer at the matrix edge).
constexpr int64_t kGoToHalfSpan = 16;

// [first, end) of `span` elements around `at`, shifted to stay inside [0, size).
std::pair<int64_t, int64_t> around(int64_t at, int64_t size) {
  const int64_t span = std::min(size, 2 * kGoToHalfSpan + 1);
  const int64_t first = std::clamp<int64_t>(at - kGoToHalfSpan, 0, size - span);
  return {first, first + span};
}

// "query i x key j", "query i x feature", "key j x feature".
QString viewAxes(HeadView view) {
  return QStringLiteral("%1 x %2").arg(QLatin1String(head_view_row_label(view)),
                                       QLatin1String(head_view_col_label(view)));
}

}  // namespace

NavigationController::NavigationController(SessionContext* context, QWidget* window)
    : QObject(window), context_(context) {
  buildMenu(window);
  connect(context_, &SessionContext::caseChanged, this, &NavigationController::updateActions);
  connect(context_, &SessionContext::filesChanged, this, &NavigationController::updateActions);
  updateActions();
}

void NavigationController::buildMenu(QWidget* window) {
  menu_ = new QMenu(tr("&Navigate"), window);
  menu_->setObjectName(QStringLiteral("navigateMenu"));
  QAction* goTo = menu_->addAction(tr("&Go to cell…"), this, &NavigationController::openGoToDialog);
  goTo->setObjectName(QStringLiteral("goToAction"));
  goTo->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_G));
  QAction* whole = menu_->addAction(tr("&Whole matrix"), this, [this] {
    context_->zoomView(context_->shownView(), MatrixWindow{});
  });
  whole->setObjectName(QStringLiteral("resetZoomAction"));
  whole->setShortcut(QKeySequence(Qt::Key_Home));
  menu_->addSeparator();
  const auto add = [this](const QString& text, const char* name, QKeyCombination key, int dStep,
                          int dLayer) {
    QAction* a =
        menu_->addAction(text, this, [this, dStep, dLayer] { moveInSeries(dStep, dLayer); });
    a->setObjectName(QLatin1String(name));
    a->setShortcut(QKeySequence(key));
    return a;
  };
  nextStep_ = add(tr("&Next step"), "nextStepAction", Qt::ALT | Qt::Key_Right, 1, 0);
  previousStep_ = add(tr("&Previous step"), "previousStepAction", Qt::ALT | Qt::Key_Left, -1, 0);
  nextLayer_ = add(tr("Next &layer"), "nextLayerAction", Qt::ALT | Qt::Key_Down, 0, 1);
  previousLayer_ = add(tr("P&revious layer"), "previousLayerAction", Qt::ALT | Qt::Key_Up, 0, -1);
}

void NavigationController::updateActions() {
  nextStep_->setEnabled(!neighbourCase(1, 0).isEmpty());
  previousStep_->setEnabled(!neighbourCase(-1, 0).isEmpty());
  nextLayer_->setEnabled(!neighbourCase(0, 1).isEmpty());
  previousLayer_->setEnabled(!neighbourCase(0, -1).isEmpty());
}

QString NavigationController::validate(const CellTarget& t) const {
  const CaseInfo* c = context_->caseInfo();
  if (c == nullptr) return tr("no case is open: open a dump and select a case first");
  const auto [rows, cols] = head_view_shape(t.view, c->dims);
  const QString view = QString::fromLatin1(head_view_name(t.view));
  if (t.batch < 0 || t.batch >= c->dims.batch) {
    return tr("batch %1 is out of range: batches 0-%2").arg(t.batch).arg(c->dims.batch - 1);
  }
  if (t.head < 0 || t.head >= c->dims.heads) {
    return tr("head %1 is out of range: heads 0-%2").arg(t.head).arg(c->dims.heads - 1);
  }
  const QString axes = viewAxes(t.view);
  if (t.row < 0 || t.row >= rows) {
    return tr("row %1 is out of range for %2 (%3): rows 0-%4")
        .arg(t.row)
        .arg(view, axes)
        .arg(rows - 1);
  }
  if (t.col < 0 || t.col >= cols) {
    return tr("column %1 is out of range for %2 (%3): columns 0-%4")
        .arg(t.col)
        .arg(view, axes)
        .arg(cols - 1);
  }
  return {};
}

bool NavigationController::goToCell(const CellTarget& t, QString* error) {
  const QString problem = validate(t);
  if (!problem.isEmpty()) {
    if (error) *error = problem;
    emit notice(problem);
    return false;
  }
  const auto [rows, cols] = head_view_shape(t.view, context_->caseInfo()->dims);
  const auto [r0, r1] = around(t.row, rows);
  const auto [c0, c1] = around(t.col, cols);
  context_->showRegion(RegionRequest{t.view, t.batch, t.head, MatrixWindow{r0, r1, c0, c1},
                                     std::make_pair(t.row, t.col)});
  return true;
}

void NavigationController::openGoToDialog() {
  CellTarget start{context_->shownView(), context_->batch(), context_->head(), 0, 0};
  const CellReadout& hovered = context_->hovered();
  if (hovered.valid() && hovered.matrix == head_view_name(start.view)) {
    start.row = hovered.row;
    start.col = hovered.col;
  }
  auto* dialog = new GoToDialog(start, qobject_cast<QWidget*>(parent()));
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  const CaseInfo* c = context_->caseInfo();
  if (c != nullptr) {
    const CaseDims dims = c->dims;
    dialog->setShapeText([dims](HeadView view) {
      const auto [rows, cols] = head_view_shape(view, dims);
      return tr("%1: %2 x %3 (%4), batch 0-%5, head 0-%6")
          .arg(QLatin1String(head_view_name(view)))
          .arg(rows)
          .arg(cols)
          .arg(viewAxes(view))
          .arg(dims.batch - 1)
          .arg(dims.heads - 1);
    });
  }
  dialog->setApply([this](const CellTarget& t) {
    QString error;
    goToCell(t, &error);
    return error;
  });
  dialog->open();
}

QString NavigationController::neighbourCase(int dStep, int dLayer) const {
  const CaseInfo* current = context_->caseInfo();
  if (current == nullptr || !current->config.step) return {};
  const int64_t step = *current->config.step;
  const int64_t layer = current->config.layer.value_or(0);
  const CaseInfo* best = nullptr;
  // The nearest step (layer) in the asked direction that has the same layer (step).
  for (const CaseInfo& c : context_->reader()->cases()) {
    if (!c.config.step) continue;
    const int64_t s = *c.config.step, l = c.config.layer.value_or(0);
    const int64_t along = dStep != 0 ? (s - step) * dStep : (l - layer) * dLayer;
    const bool sameOther = dStep != 0 ? l == layer : s == step;
    if (!sameOther || along <= 0) continue;
    const int64_t bestAlong = best == nullptr ? 0
                              : dStep != 0    ? (*best->config.step - step) * dStep
                                              : (best->config.layer.value_or(0) - layer) * dLayer;
    if (best == nullptr || along < bestAlong) best = &c;
  }
  return best == nullptr ? QString() : QString::fromStdString(best->path);
}

bool NavigationController::moveInSeries(int dStep, int dLayer) {
  const QString target = neighbourCase(dStep, dLayer);
  if (target.isEmpty()) {
    emit notice(
        dStep != 0
            ? tr("no %1 training step with this layer").arg(dStep > 0 ? tr("later") : tr("earlier"))
            : tr("no %1 layer in this step").arg(dLayer > 0 ? tr("next") : tr("previous")));
    return false;
  }
  return context_->selectCase(context_->fileIndex(), target);
}

}  // namespace attnscope
