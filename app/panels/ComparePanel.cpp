// Two runs of one view side by side and their difference (see ComparePanel.h).
#include "app/panels/ComparePanel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSplitter>
#include <QTabWidget>
#include <QToolButton>
#include <QVBoxLayout>

#include "app/gui/CompareController.h"
#include "app/gui/SessionContext.h"
#include "app/plot/HeatmapView.h"
#include "core/kernel_registry.h"

namespace attnscope {
namespace {

constexpr HeadView kComparedViews[] = {HeadView::s, HeadView::p,  HeadView::dp, HeadView::ds,
                                       HeadView::o, HeadView::dq, HeadView::dk, HeadView::dv};

HeatmapAxes axesOf(HeadView view) {
  return {QString::fromLatin1(head_view_row_label(view)),
          QString::fromLatin1(head_view_col_label(view))};
}

}  // namespace

ComparePanel::ComparePanel(SessionContext* context, CompareController* compare, QWidget* parent)
    : QWidget(parent), context_(context), compare_(compare) {
  viewBox_ = new QComboBox(this);
  viewBox_->setObjectName(QStringLiteral("compareViewBox"));
  for (HeadView v : kComparedViews) {
    viewBox_->addItem(QString::fromLatin1(head_view_name(v)), static_cast<int>(v));
  }
  withBox_ = new QComboBox(this);
  withBox_->setObjectName(QStringLiteral("compareWithBox"));
  withBox_->setToolTip(
      tr("Run B: run A (the controls' settings) with one thing changed, or the "
         "outputs the dump recorded"));
  fillWithBox();
  summary_ = new QLabel(this);
  summary_->setObjectName(QStringLiteral("compareSummary"));
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  // Its text changes with every comparison: its width must not resize the window.
  summary_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  close_ = new QToolButton(this);
  close_->setText(tr("Back to the heatmaps"));
  close_->setToolTip(tr("View > Compare two runs (Ctrl+K) switches back and forth"));
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("compare"), this));
  top->addWidget(viewBox_);
  top->addWidget(new QLabel(tr("of run A with B ="), this));
  top->addWidget(withBox_);
  top->addStretch(1);
  top->addWidget(close_);

  tabs_ = new QTabWidget(this);
  tabs_->setObjectName(QStringLiteral("compareTabs"));
  sideBySide_ = new QSplitter(Qt::Horizontal, tabs_);
  tabs_->addTab(sideBySide_, tr("A | B"));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(top);
  layout->addWidget(summary_);
  layout->addWidget(tabs_, 1);
  buildViews(HeadView::s);

  connect(viewBox_, &QComboBox::activated, this, [this](int index) {
    const auto view = static_cast<HeadView>(viewBox_->itemData(index).toInt());
    buildViews(view);
    compare_->setView(view);
  });
  connect(withBox_, &QComboBox::activated, this, &ComparePanel::onWithChosen);
  connect(compare_, &CompareController::comparisonChanged, this, &ComparePanel::showComparison);
  connect(close_, &QToolButton::clicked, this, &ComparePanel::closeRequested);
}

void ComparePanel::fillWithBox() {
  using Kind = CompareWith::Kind;
  const auto add = [this](const QString& text, Kind kind, Precision p, const QString& backend) {
    withBox_->addItem(text, QVariantList{static_cast<int>(kind), static_cast<int>(p), backend});
  };
  add(tr("the other kernel mode (fused / unfused)"), Kind::other_mode, Precision::f32, {});
  for (Precision p : {Precision::f32, Precision::f16, Precision::bf16}) {
    add(tr("precision %1").arg(QLatin1String(precision_name(p))), Kind::precision, p, {});
  }
  add(tr("the outputs the dump recorded"), Kind::recorded, Precision::f32, {});
  for (const KernelVariant& v : kernel_variants()) {
    const QString name = QString::fromStdString(v.name);
    add(tr("backend %1").arg(name), Kind::backend, Precision::f32, name);
  }
}

void ComparePanel::onWithChosen(int index) {
  const QVariantList data = withBox_->itemData(index).toList();
  CompareWith with;
  with.kind = static_cast<CompareWith::Kind>(data.value(0).toInt());
  with.precision = static_cast<Precision>(data.value(1).toInt());
  with.backend = data.value(2).toString().toStdString();
  compare_->setWith(with);
}

void ComparePanel::buildViews(HeadView view) {
  delete a_;
  delete b_;
  delete diff_;
  a_ = new HeatmapView(view, sideBySide_);
  b_ = new HeatmapView(view, sideBySide_);
  a_->setObjectName(QStringLiteral("compareA"));
  b_->setObjectName(QStringLiteral("compareB"));
  sideBySide_->addWidget(a_);
  sideBySide_->addWidget(b_);
  diff_ = new HeatmapView(QStringLiteral("%1 A - B").arg(QLatin1String(head_view_name(view))),
                          ColormapKind::diverging, axesOf(view), tabs_);
  diff_->setObjectName(QStringLiteral("compareDifference"));
  tabs_->addTab(diff_, tr("A - B"));
  for (HeatmapView* v : {a_, b_, diff_}) {
    connect(v, &HeatmapView::viewWindowChanged, this,
            [this, v](const MatrixWindow& w) { syncZoom(v, w); });
  }
  viewBox_->setCurrentIndex(viewBox_->findData(static_cast<int>(view)));
  shownKey_.clear();
  showComparison();
}

void ComparePanel::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  // Open on the tab the heatmaps showed, when it is one of the compared views.
  const HeadView shown = context_->shownView();
  if (viewBox_->findData(static_cast<int>(shown)) >= 0 && shown != compare_->view()) {
    buildViews(shown);
    compare_->setView(shown);
  }
  compare_->setWindow(a_->visibleWindow(), a_->plotPixelSize());
  compare_->setActive(true);
}

void ComparePanel::hideEvent(QHideEvent* event) {
  QWidget::hideEvent(event);
  compare_->setActive(false);
}

void ComparePanel::syncZoom(HeatmapView* from, const MatrixWindow& window) {
  if (syncing_) return;
  syncing_ = true;
  for (HeatmapView* v : {a_, b_, diff_}) {
    if (v != from && v->grid() != nullptr && v->visibleWindow() != window) v->zoomTo(window);
  }
  syncing_ = false;
  compare_->setWindow(window, from->plotPixelSize());
}

void ComparePanel::showComparison() {
  const std::shared_ptr<const Comparison> c = compare_->comparison();
  if (!c || c->view != compare_->view() || !c->aGrid) {
    summary_->setText(c ? QString() : tr("computing…"));
    return;
  }
  const QString key = QStringLiteral("%1|%2|%3|%4|%5")
                          .arg(QString::fromStdString(c->a->case_path))
                          .arg(c->a->request.batch)
                          .arg(c->a->request.head)
                          .arg(static_cast<int>(c->view))
                          .arg(c->bLabel);
  const bool reset = key != shownKey_;
  shownKey_ = key;
  const QString where = QStringLiteral("%1 · b%2 h%3")
                            .arg(QString::fromStdString(c->a->case_path))
                            .arg(c->a->request.batch)
                            .arg(c->a->request.head);
  a_->setGrid(c->aGrid, reset);
  a_->setStamp(tr("A: %1 · %2").arg(c->aLabel, where));
  if (c->bGrid) {
    b_->setGrid(c->bGrid, reset);
    b_->setStamp(tr("B: %1 · %2").arg(c->bLabel, where));
  } else {
    b_->clear();
  }
  if (c->difference) {
    diff_->setGrid(std::make_shared<const MatrixGrid>(c->difference->grid), reset);
    diff_->setStamp(tr("A (%1) - B (%2) · %3").arg(c->aLabel, c->bLabel, where));
  } else {
    diff_->clear();
  }
  const QString text = summary();
  summary_->setText(text);
  summary_->setToolTip(text);
}

QString ComparePanel::summary() const {
  const std::shared_ptr<const Comparison> c = compare_->comparison();
  if (!c || !c->aGrid) return {};
  QString text = tr("A: %1 · B: %2").arg(c->aLabel, c->bLabel);
  if (!c->problem.isEmpty()) return text + QStringLiteral(" · ") + c->problem;
  if (!c->difference) return text;
  const GridDifference& d = *c->difference;
  const QString cells = c->aGrid->pooled ? tr("pooled cells") : tr("elements");
  if (d.differ == 0 && d.only_a == 0 && d.only_b == 0) {
    return text + tr(" · identical (%1 compared)").arg(c->aGrid->cls.size());
  }
  if (d.differ > 0) {
    text += tr(" · max |A - B| %1 at (%2, %3) · %4 %5 differ")
                .arg(formatNumber(d.max_abs))
                .arg(d.max_row)
                .arg(d.max_col)
                .arg(d.differ)
                .arg(cells);
  }
  if (d.only_a > 0 || d.only_b > 0) {
    text += tr(" · non-finite in A only: %1, in B only: %2").arg(d.only_a).arg(d.only_b);
  }
  return text;
}

}  // namespace attnscope
