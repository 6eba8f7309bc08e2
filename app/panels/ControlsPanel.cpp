// What-if controls bound to the SessionContext (see ControlsPanel.h).
#include "app/panels/ControlsPanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleValidator>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "app/export/SettingNames.h"
#include "app/gui/AnalysisController.h"
#include "app/gui/SessionContext.h"
#include "app/plot/Colormaps.h"
#include "core/kernel_registry.h"
#include "core/replay.h"

namespace attnscope {
namespace {

constexpr int kSliderSteps = 1200;
constexpr double kSliderDecades = 3.0;  // each side of the default scale

QString exactText(double v) {
  return QString::number(v, 'g', 12);
}

}  // namespace

ControlsPanel::ControlsPanel(SessionContext* context, AnalysisController* analysis, QWidget* parent)
    : QWidget(parent), context_(context), analysis_(analysis) {
  caseLabel_ = new QLabel(tr("no case selected\n"), this);  // two lines, as with a case
  auto* scaleBox = new QWidget(this);
  buildScaleRow(scaleBox);

  precision_ = new QComboBox(this);
  precision_->setObjectName(QStringLiteral("precisionBox"));
  precision_->addItem(tr("as recorded"), -1);
  for (Precision p : {Precision::f32, Precision::f16, Precision::bf16}) {
    precision_->addItem(QString::fromLatin1(precision_name(p)), static_cast<int>(p));
  }
  mode_ = new QComboBox(this);
  mode_->setObjectName(QStringLiteral("modeBox"));
  mode_->addItem(tr("as recorded"), -1);
  mode_->addItem(modeName(Mode::fused), static_cast<int>(Mode::fused));
  mode_->addItem(modeName(Mode::unfused), static_cast<int>(Mode::unfused));
  mode_->setToolTip(
      tr("fused: FlashAttention-2 (fp32 scores and softmax)\n"
         "unfused: eager math attention (every op rounded)"));
  maskFill_ = new QComboBox(this);
  maskFill_->setObjectName(QStringLiteral("maskFillBox"));
  maskFill_->addItem(tr("as recorded"), -1);
  for (MaskFill f : {MaskFill::neg_inf, MaskFill::neg_1e9, MaskFill::finfo_min, MaskFill::safe}) {
    maskFill_->addItem(maskFillName(f), static_cast<int>(f));
  }
  backend_ = new QComboBox(this);
  backend_->setObjectName(QStringLiteral("backendBox"));
  backend_->addItem(tr("attnscope CPU (mode above)"), QString());
  backend_->setItemData(0, tr("own CPU kernels emulating the precision in the chosen mode"),
                        Qt::ToolTipRole);
  for (const KernelVariant& v : kernel_variants()) {
    backend_->addItem(QString::fromStdString(v.name), QString::fromStdString(v.name));
    backend_->setItemData(backend_->count() - 1, QString::fromStdString(v.description),
                          Qt::ToolTipRole);
  }
  backend_->setToolTip(
      tr("What computes O, LSE and the gradients (S, P, dP, dS always come "
         "from the own CPU kernel)"));
  auto* clipBox = new QWidget(this);
  buildClipRow(clipBox);
  batch_ = new QSpinBox(this);
  batch_->setObjectName(QStringLiteral("batchBox"));
  head_ = new QSpinBox(this);
  head_->setObjectName(QStringLiteral("headBox"));

  // Long entries (backend names) elide in the closed box instead of widening the dock.
  for (QComboBox* box : {precision_, mode_, maskFill_, backend_}) {
    box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    box->setMinimumContentsLength(8);
  }
  // Batch and head side by side: the controls fit a laptop's side column without scrolling.
  auto* place = new QWidget(this);
  auto* placeRow = new QHBoxLayout(place);
  placeRow->setContentsMargins(0, 0, 0, 0);
  placeRow->addWidget(batch_, 1);
  placeRow->addWidget(new QLabel(tr("head"), place));
  placeRow->addWidget(head_, 1);
  auto* form = new QFormLayout;
  form->setVerticalSpacing(3);
  form->addRow(tr("scale"), scaleBox);
  form->addRow(tr("precision"), precision_);
  form->addRow(tr("mode"), mode_);
  form->addRow(tr("mask fill"), maskFill_);
  form->addRow(tr("backend"), backend_);
  form->addRow(tr("clip norm"), clipBox);
  form->addRow(tr("batch"), place);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 2, 4, 2);
  layout->setSpacing(3);
  layout->addWidget(caseLabel_);
  layout->addLayout(form);
  layout->addStretch(1);

  // The notes are placed by the window above the pages, where a paragraph fits.
  notes_ = new QWidget(this);
  notes_->setObjectName(QStringLiteral("controlNotes"));
  auto* notesLayout = new QVBoxLayout(notes_);
  notesLayout->setContentsMargins(4, 0, 4, 0);
  notesLayout->setSpacing(0);
  notesLayout->addWidget(scaleNote_);
  notesLayout->addWidget(clipReport_);

  connect(precision_, &QComboBox::activated, this, [this](int index) {
    const int p = precision_->itemData(index).toInt();
    context_->setPrecision(p < 0 ? std::nullopt : std::optional(static_cast<Precision>(p)));
  });
  connect(mode_, &QComboBox::activated, this, [this](int index) {
    const int data = mode_->itemData(index).toInt();
    context_->setMode(data < 0 ? std::nullopt : std::optional<Mode>(static_cast<Mode>(data)));
  });
  connect(maskFill_, &QComboBox::activated, this, [this](int index) {
    const int data = maskFill_->itemData(index).toInt();
    context_->setMaskFill(data < 0 ? std::nullopt
                                   : std::optional<MaskFill>(static_cast<MaskFill>(data)));
  });
  connect(backend_, &QComboBox::activated, this, [this](int index) {
    context_->setBackend(backend_->itemData(index).toString().toStdString());
  });
  connect(batch_, qOverload<int>(&QSpinBox::valueChanged), context_, &SessionContext::setBatch);
  connect(head_, qOverload<int>(&QSpinBox::valueChanged), context_, &SessionContext::setHead);
  connect(context_, &SessionContext::caseChanged, this, &ControlsPanel::onCaseChanged);
  connect(context_, &SessionContext::headChanged, this, &ControlsPanel::showSettings);
  connect(context_, &SessionContext::settingsChanged, this, &ControlsPanel::showReplay);
  connect(context_, &SessionContext::settingsChanged, this, &ControlsPanel::showSettings);
  connect(context_, &SessionContext::settingsChanged, this, &ControlsPanel::updateBackends);
  connect(context_, &SessionContext::resultChanged, this, &ControlsPanel::showClipReport);
  connect(context_, &SessionContext::settingsChanged, this, &ControlsPanel::showScaleNote);
  connect(analysis_, &AnalysisController::summaryChanged, this, &ControlsPanel::showScaleNote);
  onCaseChanged();
}

void ControlsPanel::buildClipRow(QWidget* box) {
  clipOn_ = new QCheckBox(tr("clip"), box);
  clipOn_->setObjectName(QStringLiteral("clipBox"));
  clipOn_->setToolTip(
      tr("clip_grad_norm_(max_norm) over dQ, dK, dV of the whole case (as the findings and "
         "attnscope-cli run --clip), or per kv head; the gradient tabs show the head's clipped "
         "share. Untick a gradient tab's range 'auto' first to keep its colours and see the "
         "change."));
  clipScope_ = new QComboBox(box);
  clipScope_->setObjectName(QStringLiteral("clipScopeBox"));
  clipScope_->addItem(tr("case"), static_cast<int>(ClipScope::whole_case));
  clipScope_->addItem(tr("per kv head"), static_cast<int>(ClipScope::per_kv_head));
  clipScope_->setToolTip(tr("What one clip_grad_norm_ call covers"));
  clipEdit_ = new QLineEdit(QStringLiteral("1"), box);
  clipEdit_->setObjectName(QStringLiteral("clipEdit"));
  auto* validator = new QDoubleValidator(clipEdit_);
  validator->setBottom(0);
  clipEdit_->setValidator(validator);
  clipReport_ = new QLabel(this);
  clipReport_->setObjectName(QStringLiteral("clipReport"));
  clipReport_->setWordWrap(true);
  clipReport_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  clipReport_->setVisible(false);
  auto* row = new QHBoxLayout(box);
  row->setContentsMargins(0, 0, 0, 0);
  row->addWidget(clipOn_);
  row->addWidget(clipEdit_, 1);
  row->addWidget(clipScope_);
  connect(clipOn_, &QCheckBox::toggled, this, &ControlsPanel::commitClip);
  connect(clipEdit_, &QLineEdit::editingFinished, this, &ControlsPanel::commitClip);
  connect(clipScope_, &QComboBox::activated, this, [this](int index) {
    context_->setClipScope(static_cast<ClipScope>(clipScope_->itemData(index).toInt()));
  });
}

void ControlsPanel::commitClip() {
  bool ok = false;
  const double v = clipEdit_->text().toDouble(&ok);
  if (!clipOn_->isChecked()) {
    context_->setClipNorm(std::nullopt);
  } else if (ok && std::isfinite(v) && v > 0) {
    context_->setClipNorm(v);
  } else {
    showSettings();
  }
}

void ControlsPanel::showClipReport() {
  const auto r = context_->result();
  clipReport_->setVisible(r && r->clip);
  if (!r || !r->clip) {
    clipReport_->clear();
    return;
  }
  const ClipResult& c = *r->clip;
  const auto norms = [&c](const std::vector<double>& n) {
    QStringList parts;
    for (size_t i = 0; i < n.size() && i < c.names.size(); ++i) {
      parts << QStringLiteral("%1 %2").arg(QString::fromStdString(c.names[i]),
                                           QString::number(n[i], 'g', 4));
    }
    return parts.join(QStringLiteral(", "));
  };
  const CaseInfo* info = context_->caseInfo();
  const int64_t group = info != nullptr ? info->dims.heads / info->dims.kv_heads : 1;
  const QString over =
      r->request.run.clip_scope == ClipScope::whole_case
          ? tr("case")
          : tr("kv head %1 of batch %2").arg(r->request.head / group).arg(r->request.batch);
  QString text =
      tr("clip %1: total norm %2 · coef %3 · before: %4 · after: %5")
          .arg(over, QString::number(c.total_norm, 'g', 6), QString::number(c.coef, 'g', 6),
               norms(c.norms_before), norms(c.norms_after));
  if (c.nonfinite_total) text += tr(" · non-finite total norm: every clipped gradient is NaN");
  clipReport_->setText(text);
}

void ControlsPanel::showScaleNote() {
  const auto summary = analysis_->summary();
  const Precision p = context_->effectivePrecision();
  // Eager (unfused) attention rounds Q K^T before scaling it; the fused kernel keeps it in fp32.
  const bool beyond = summary && analysis_->summaryCurrent() && summary->max_abs_qk &&
                      context_->effectiveMode() == Mode::unfused &&
                      *summary->max_abs_qk > finfo_max(p);
  scaleNote_->setVisible(beyond);
  if (!beyond) return;
  scaleNote_->setText(
      tr("No scale helps: Q K^T reaches %1 > %2 (%3 max) before it is scaled, so S is inf at any "
         "scale. Scale q before the matmul, or run fused (fp32 scores) or bf16.")
          .arg(formatNumber(*summary->max_abs_qk), QString::number(finfo_max(p), 'g', 6),
               QLatin1String(precision_name(p))));
}

void ControlsPanel::buildScaleRow(QWidget* box) {
  slider_ = new QSlider(Qt::Horizontal, box);
  slider_->setObjectName(QStringLiteral("scaleSlider"));
  slider_->setRange(0, kSliderSteps);
  slider_->setToolTip(tr("Softmax scale, logarithmic: 1/1000 to 1000 times the default"));
  scaleEdit_ = new QLineEdit(box);
  scaleEdit_->setObjectName(QStringLiteral("scaleEdit"));
  auto* validator = new QDoubleValidator(scaleEdit_);
  validator->setBottom(0);
  scaleEdit_->setValidator(validator);
  scaleEdit_->setToolTip(tr("Exact softmax scale"));
  reset_ = new QToolButton(box);
  reset_->setText(tr("reset"));
  reset_->setToolTip(tr("Back to the case's scale (attribute, else 1/sqrt(D))"));
  defaultLabel_ = new QLabel(box);
  scaleNote_ = new QLabel(this);
  scaleNote_->setObjectName(QStringLiteral("scaleNote"));
  scaleNote_->setWordWrap(true);
  scaleNote_->setStyleSheet(QStringLiteral("color: #b45309;"));
  scaleNote_->setVisible(false);
  auto* row = new QHBoxLayout;
  row->addWidget(slider_, 1);
  row->addWidget(scaleEdit_);
  row->addWidget(reset_);
  scaleEdit_->setMaximumWidth(
      scaleEdit_->fontMetrics().horizontalAdvance(QStringLiteral("0.0883883476")));
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addLayout(row);
  layout->addWidget(defaultLabel_);

  connect(slider_, &QSlider::valueChanged, this,
          [this](int position) { context_->setScale(sliderToScale(position)); });
  connect(scaleEdit_, &QLineEdit::editingFinished, this, &ControlsPanel::commitScaleEdit);
  connect(reset_, &QToolButton::clicked, this, [this] { context_->setScale(std::nullopt); });
}

double ControlsPanel::sliderToScale(int position) const {
  const double decades = kSliderDecades * (2.0 * position / kSliderSteps - 1.0);
  return context_->defaultScale() * std::pow(10.0, decades);
}

int ControlsPanel::scaleToSlider(double scale) const {
  const double decades = std::log10(scale / context_->defaultScale());
  const double position = (decades / kSliderDecades + 1.0) * kSliderSteps / 2.0;
  return static_cast<int>(std::lround(std::clamp(position, 0.0, double{kSliderSteps})));
}

void ControlsPanel::commitScaleEdit() {
  bool ok = false;
  const double v = scaleEdit_->text().toDouble(&ok);
  if (ok && std::isfinite(v) && v > 0) {
    context_->setScale(v);
  } else {
    showSettings();
  }
}

void ControlsPanel::onCaseChanged() {
  const CaseInfo* c = context_->caseInfo();
  setEnabled(c != nullptr);
  if (c != nullptr) {
    const CaseDims& d = c->dims;
    caseLabel_->setText(QStringLiteral("B=%1 H=%2 Hk=%3 D=%4\nSq=%5 Sk=%6 · %7")
                            .arg(d.batch)
                            .arg(d.heads)
                            .arg(d.kv_heads)
                            .arg(d.head_dim)
                            .arg(d.seqlen_q)
                            .arg(d.seqlen_k)
                            .arg(QString::fromStdString(c->config.dtype)));
    const QSignalBlocker b1(batch_), b2(head_);
    batch_->setRange(0, static_cast<int>(d.batch - 1));
    head_->setRange(0, static_cast<int>(d.heads - 1));
  }
  showReplay();
  updateBackends();
  showSettings();
}

void ControlsPanel::showReplay() {
  if (const std::optional<Replay> r = context_->replay()) {
    const Replay& replay = *r;
    caseLabel_->setToolTip(
        tr("recorded run, replayed by default: %1").arg(QString::fromStdString(replay.text)));
    precision_->setItemText(
        0, tr("as recorded (%1)").arg(QString::fromLatin1(precision_name(replay.precision))));
    // A dump that does not name its backend may have run either kernel: the findings judge
    // both (as `scan` does), the heatmaps show the first.
    mode_->setItemText(
        0,
        replay.modes.size() > 1
            ? tr("as recorded (%1 or %2; %1 shown)")
                  .arg(modeName(replay.modes[0]), modeName(replay.modes[1]))
            : tr("as recorded (%1)").arg(replay.upcast ? tr("upcast") : modeName(replay.modes[0])));
    maskFill_->setItemText(0, tr("as recorded (%1)").arg(maskFillName(replay.mask_fill)));
  }
}

AttnParams ControlsPanel::caseParams() const {
  // Stand-ins for the case's mask / bias: the support checks look at their presence only.
  static const uint8_t kMask = 1;
  static const double kBias = 0;
  AttnParams p;
  const CaseInfo* c = context_->caseInfo();
  const CaseDims& d = c->dims;
  p.batch = d.batch;
  p.heads = d.heads;
  p.kv_heads = d.kv_heads;
  p.seqlen_q = d.seqlen_q;
  p.seqlen_k = d.seqlen_k;
  p.head_dim = d.head_dim;
  p.head_dim_v = d.head_dim_v;
  p.scale = context_->effectiveScale();
  p.softcap = c->config.softcap;
  p.causal = c->config.causal;
  p.causal_align = c->config.causal_align;
  p.mask_fill = context_->effectiveMaskFill();
  p.precision = context_->effectivePrecision();
  if (c->has("mask")) p.mask = &kMask;
  if (c->has("bias")) p.bias = &kBias;
  return p;
}

void ControlsPanel::updateBackends() {
  auto* model = qobject_cast<QStandardItemModel*>(backend_->model());
  if (context_->caseInfo() == nullptr || model == nullptr) return;
  const AttnParams params = caseParams();
  for (int i = 1; i < backend_->count(); ++i) {
    const KernelVariant* v = find_variant(backend_->itemData(i).toString().toStdString());
    if (v == nullptr) continue;
    // As the head compute runs it: a variant's only precision / mode wins over the controls.
    const Precision precision =
        v->precisions.size() == 1 ? v->precisions.front() : params.precision;
    const Mode mode = v->modes.empty() ? context_->effectiveMode() : v->modes.front();
    AttnParams p = params;
    p.precision = precision;
    const Support support = v->supports(p, precision, mode);
    model->item(i)->setEnabled(support.ok);
    const QString description = QString::fromStdString(v->description);
    backend_->setItemData(
        i,
        support.ok ? description
                   : tr("cannot run this case: %1").arg(QString::fromStdString(support.reason)),
        Qt::ToolTipRole);
  }
}

void ControlsPanel::showSettings() {
  const RunChoice& s = context_->choice();
  const QSignalBlocker b1(slider_), b2(precision_), b3(mode_), b4(maskFill_), b5(batch_), b6(head_);
  slider_->setValue(scaleToSlider(context_->effectiveScale()));
  scaleEdit_->setText(exactText(context_->effectiveScale()));
  scaleEdit_->setCursorPosition(0);  // the leading digits when the box is narrower than the text
  // Six digits fit the side column; the exact value is the tooltip.
  defaultLabel_->setText(tr("default %1%2")
                             .arg(QString::number(context_->defaultScale(), 'g', 6))
                             .arg(s.scale ? QString() : tr(" (in use)")));
  defaultLabel_->setToolTip(exactText(context_->defaultScale()));
  reset_->setEnabled(s.scale.has_value());
  precision_->setCurrentIndex(s.precision ? precision_->findData(static_cast<int>(*s.precision))
                                          : 0);
  mode_->setCurrentIndex(s.mode() ? mode_->findData(static_cast<int>(*s.mode())) : 0);
  maskFill_->setCurrentIndex(s.mask_fill ? maskFill_->findData(static_cast<int>(*s.mask_fill)) : 0);
  backend_->setCurrentIndex(std::max(0, backend_->findData(QString::fromStdString(s.backend))));
  const QSignalBlocker b7(clipOn_), b8(clipScope_);
  clipOn_->setChecked(s.clip_norm.has_value());
  clipScope_->setCurrentIndex(clipScope_->findData(static_cast<int>(s.clip_scope)));
  if (s.clip_norm) clipEdit_->setText(exactText(*s.clip_norm));
  batch_->setValue(static_cast<int>(context_->batch()));
  head_->setValue(static_cast<int>(context_->head()));
}

}  // namespace attnscope
