// Annotate menu / toolbar, per-view annotation layers and the sidecar sessions (see
// AnnotationController.h).
#include "app/gui/AnnotationController.h"

#include <QAction>
#include <QActionGroup>
#include <QInputDialog>
#include <QLineEdit>
#include <QMenu>
#include <QToolBar>

#include "app/gui/AnnotationBoard.h"
#include "app/gui/SessionContext.h"
#include "core/view/head_view.h"

namespace attnscope {

AnnotationController::AnnotationController(SessionContext* context, QWidget* window)
    : QObject(window), context_(context) {
  buildActions(window);
  connect(context_, &SessionContext::resultChanged, this, &AnnotationController::refresh);
  connect(context_, &SessionContext::caseChanged, this, &AnnotationController::refresh);
  context_->annotations()->setEditor(AnnotationEditor{
      [this](const QString& view, const Annotation& placed) { return onPlaced(view, placed); },
      [this](const Annotation& before, const Annotation& after) {
        return replaceAnnotation(before, after);
      },
      [this](const Annotation& a) { return removeAnnotation(a); },
      [this](const Annotation& a) { editText(a); }});
}

void AnnotationController::buildActions(QWidget* window) {
  menu_ = new QMenu(tr("&Annotate"), window);
  menu_->setObjectName(QStringLiteral("annotateMenu"));
  toolBar_ = new QToolBar(tr("Annotate"), window);
  toolBar_->setObjectName(QStringLiteral("annotateToolBar"));
  tools_ = new QActionGroup(this);
  const std::pair<AnnotationTool, QString> tools[] = {{AnnotationTool::none, tr("Pan / pin")},
                                                      {AnnotationTool::text, tr("Text")},
                                                      {AnnotationTool::arrow, tr("Arrow")},
                                                      {AnnotationTool::box, tr("Box")}};
  for (const auto& [tool, name] : tools) {
    QAction* action = tools_->addAction(name);
    action->setCheckable(true);
    action->setChecked(tool == AnnotationTool::none);
    action->setData(static_cast<int>(tool));
    action->setToolTip(tool == AnnotationTool::none
                           ? tr("Drag pans, a click pins a cell")
                           : tr("Place a %1 on a heatmap (label from the text field)").arg(name));
    connect(action, &QAction::triggered, this, [this, tool = tool] { setTool(tool); });
    menu_->addAction(action);
    toolBar_->addAction(action);
  }
  labelEdit_ = new QLineEdit(toolBar_);
  labelEdit_->setObjectName(QStringLiteral("annotationLabel"));
  labelEdit_->setPlaceholderText(tr("label of the next annotation"));
  labelEdit_->setMaximumWidth(240);
  connect(labelEdit_, &QLineEdit::textChanged, this, [this](const QString& t) { label_ = t; });
  toolBar_->addWidget(labelEdit_);

  menu_->addSeparator();
  toolBar_->addSeparator();
  markers_ = menu_->addAction(tr("Automatic &markers"));
  markers_->setCheckable(true);
  markers_->setChecked(true);
  markers_->setToolTip(tr("Mark the first non-finite element and the largest |value|"));
  connect(markers_, &QAction::toggled, this, &AnnotationController::refresh);
  toolBar_->addAction(markers_);
  QAction* undo =
      menu_->addAction(tr("&Remove last annotation"), this, &AnnotationController::removeLast);
  undo->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Backspace));
  menu_->addAction(tr("&Clear annotations of this view"), this, [this] {
    clearView(QString::fromLatin1(head_view_name(context_->shownView())));
  });
}

void AnnotationController::setTool(AnnotationTool tool) {
  for (QAction* a : tools_->actions()) a->setChecked(a->data().toInt() == static_cast<int>(tool));
  context_->annotations()->setTool(tool);
}

void AnnotationController::setLabel(const QString& label) {
  labelEdit_->setText(label);
}

void AnnotationController::setMarkersShown(bool shown) {
  markers_->setChecked(shown);
}

AnnotationTool AnnotationController::tool() const {
  return context_->annotations()->tool();
}

bool AnnotationController::markersShown() const {
  return markers_->isChecked();
}

SessionFile* AnnotationController::currentSession() {
  if (context_->fileIndex() < 0) return nullptr;
  const QString dump = context_->file(context_->fileIndex()).path;
  auto it = sessions_.find(dump);
  if (it == sessions_.end()) {
    it = sessions_.emplace(dump, SessionFile::load(dump)).first;
    for (const QString& note : it->second.notes()) emit notice(note);
  }
  return &it->second;
}

const SessionFile* AnnotationController::session() const {
  if (context_->fileIndex() < 0) return nullptr;
  const auto it = sessions_.find(context_->file(context_->fileIndex()).path);
  return it == sessions_.end() ? nullptr : &it->second;
}

CaseSession* AnnotationController::currentCase() {
  SessionFile* s = currentSession();
  if (s == nullptr || context_->casePath().isEmpty()) return nullptr;
  return &s->cases[context_->casePath()];
}

QList<Annotation> AnnotationController::markersOf(const QString& view,
                                                  std::shared_ptr<const MatrixGrid> grid,
                                                  qint64 batch, qint64 head) const {
  Markers& m = markers_cache_[view];
  if (m.grid != grid || m.batch != batch || m.head != head) {
    m.list = automaticMarkers(*grid, view, batch, head);
    m.grid = std::move(grid);
    m.batch = batch;
    m.head = head;
  }
  return m.list;
}

void AnnotationController::refresh() {
  currentSession();  // a newly selected dump's sidecar is read here
  const auto result = context_->result();
  const qint64 batch = result ? result->request.batch : context_->batch();
  const qint64 head = result ? result->request.head : context_->head();
  const QList<Annotation> all = caseAnnotations();
  QMap<QString, QList<Annotation>> drawn;
  for (const Annotation& a : all) {
    if (a.batch == batch && a.head == head) drawn[a.view] << a;
  }
  if (markersShown() && result) {
    for (HeadView v : kHeadViews) {
      const MatrixGrid& grid = result->grid(v);
      if (grid.empty()) continue;
      const QString name = QString::fromLatin1(head_view_name(v));
      // Aliasing pointer: the grid stays alive as long as the result it belongs to.
      drawn[name] += markersOf(name, std::shared_ptr<const MatrixGrid>(result, &grid), batch, head);
    }
  }
  context_->annotations()->publish(all, drawn);
}

bool AnnotationController::onPlaced(const QString& view, Annotation annotation) {
  const auto result = context_->result();
  if (!result) return false;
  annotation.view = view;
  annotation.batch = result->request.batch;
  annotation.head = result->request.head;
  annotation.text = label_.trimmed();
  if (annotation.kind == AnnotationKind::text && annotation.text.isEmpty()) {
    annotation.text = tr("note");
  }
  QString error;
  if (addAnnotation(annotation, &error)) return true;
  emit notice(error);
  return false;
}

bool AnnotationController::addAnnotation(const Annotation& annotation, QString* error) {
  SessionFile* s = currentSession();
  CaseSession* c = currentCase();
  if (s == nullptr || c == nullptr) {
    if (error) *error = tr("open a case before annotating it");
    return false;
  }
  c->annotations << annotation;
  refresh();
  return save(*s, error);
}

bool AnnotationController::removeLast() {
  CaseSession* c = currentCase();
  const QString shown = QString::fromLatin1(head_view_name(context_->shownView()));
  const QList<Annotation> mine = context_->annotations()->userAnnotations(shown);
  if (c == nullptr || mine.isEmpty()) return false;
  c->annotations.removeAt(c->annotations.lastIndexOf(mine.last()));
  refresh();
  return save(*currentSession());
}

void AnnotationController::clearView(const QString& view) {
  CaseSession* c = currentCase();
  if (c == nullptr) return;
  for (const Annotation& a : context_->annotations()->userAnnotations(view)) {
    c->annotations.removeAll(a);
  }
  refresh();
  save(*currentSession());
}

QList<Annotation> AnnotationController::caseAnnotations() const {
  const SessionFile* s = session();
  if (s == nullptr || !s->cases.contains(context_->casePath())) return {};
  return s->cases.value(context_->casePath()).annotations;
}

bool AnnotationController::replaceAnnotation(const Annotation& before, const Annotation& after) {
  CaseSession* c = currentCase();
  const qsizetype index = c == nullptr ? -1 : c->annotations.indexOf(before);
  if (index < 0) return false;
  c->annotations[index] = after;
  refresh();
  return save(*currentSession());
}

bool AnnotationController::removeAnnotation(const Annotation& annotation) {
  CaseSession* c = currentCase();
  const qsizetype index = c == nullptr ? -1 : c->annotations.indexOf(annotation);
  if (index < 0) return false;
  c->annotations.removeAt(index);
  refresh();
  return save(*currentSession());
}

void AnnotationController::editText(const Annotation& annotation) {
  auto* dialog = new QInputDialog(qobject_cast<QWidget*>(parent()));
  dialog->setObjectName(QStringLiteral("annotationTextDialog"));
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  dialog->setWindowTitle(tr("Annotation text"));
  dialog->setLabelText(
      tr("Text of the %1 on %2:").arg(annotationKindName(annotation.kind), annotation.view));
  dialog->setTextValue(annotation.text);
  connect(dialog, &QInputDialog::textValueSelected, this, [this, annotation](const QString& text) {
    Annotation edited = annotation;
    edited.text = text.trimmed();
    if (edited.kind == AnnotationKind::text && edited.text.isEmpty()) return;
    replaceAnnotation(annotation, edited);
  });
  dialog->open();
}

bool AnnotationController::saveSession() {
  SessionFile* s = currentSession();
  return s != nullptr && save(*s);
}

bool AnnotationController::save(SessionFile& session, QString* error) {
  emit aboutToSave(&session);
  QString problem;
  if (!session.save(&problem)) {
    if (error) *error = problem;
    emit notice(problem);
    return false;
  }
  if (!session.merged().isEmpty()) {  // another window's annotations joined this session
    emit notice(session.merged());
    refresh();
  }
  // View state alone always lives in the fallback; annotations land there only when the
  // dump's folder cannot take them.
  if (session.inFallback() && session.annotated() && !fallbackNoticed_.contains(session.dump())) {
    fallbackNoticed_.insert(session.dump());
    emit notice(tr("%1: its folder is not writable; the session is kept in %2")
                    .arg(session.dump(), session.path()));
  }
  return true;
}

}  // namespace attnscope
