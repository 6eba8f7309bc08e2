// Help menu: shortcut sheet and About (see HelpMenu.h).
#include "app/gui/HelpMenu.h"

#include <QAction>
#include <QDialog>
#include <QDialogButtonBox>
#include <QMainWindow>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QVBoxLayout>

#include "app/plot/PlotExport.h"
#include "core/io/hdf5_dump.h"

#ifndef ATTNSCOPE_VERSION
#define ATTNSCOPE_VERSION "unknown"
#endif

namespace attnscope {
namespace {

// Every action with a shortcut under `menu`, as "keys<TAB>Menu: action", submenus included.
void collectShortcuts(const QMenu* menu, const QString& where, QStringList* lines) {
  for (const QAction* a : menu->actions()) {
    if (a->menu() != nullptr) {
      collectShortcuts(a->menu(), where + QStringLiteral(" › ") + a->menu()->title(), lines);
      continue;
    }
    if (a->shortcut().isEmpty()) continue;
    QString text = a->text();
    text.remove(QLatin1Char('&'));
    *lines << QStringLiteral("%1\t%2: %3")
                  .arg(a->shortcut().toString(QKeySequence::NativeText), where, text);
  }
}

}  // namespace

HelpMenu::HelpMenu(QMainWindow* window) : QObject(window), window_(window) {
  menu_ = new QMenu(tr("&Help"), window);
  menu_->setObjectName(QStringLiteral("helpMenu"));
  QAction* keys = menu_->addAction(tr("&Keyboard shortcuts…"), this, &HelpMenu::showShortcuts);
  keys->setObjectName(QStringLiteral("shortcutsAction"));
  keys->setShortcut(QKeySequence(Qt::Key_F1));
  menu_->addAction(tr("&About attnscope"), this, &HelpMenu::showAbout)
      ->setObjectName(QStringLiteral("aboutAction"));
}

QString HelpMenu::shortcutSheet() const {
  QStringList lines;
  for (const QAction* a : window_->menuBar()->actions()) {
    if (a->menu() == nullptr) continue;
    QString title = a->menu()->title();
    collectShortcuts(a->menu(), title.remove(QLatin1Char('&')), &lines);
  }
  lines << QString() << tr("On a heatmap:")
        << tr("wheel\tzoom around the pointer (within the matrix)") << tr("drag\tpan")
        << tr("double-click\tshow the whole matrix (as Home)")
        << tr("click\tpin the cell in the inspector");
  return lines.join(QLatin1Char('\n'));
}

QString HelpMenu::aboutText() const {
  return tr("attnscope %1 — a visual debugger for fused attention\n\n"
            "Qt %2 (built with %3) · QCustomPlot %4 · HDF5 %5\n"
            "built with %6, %7")
      .arg(QStringLiteral(ATTNSCOPE_VERSION), QString::fromLatin1(qVersion()),
           QStringLiteral(QT_VERSION_STR), plotLibraryVersion(),
           QString::fromStdString(hdf5_library_version()), QStringLiteral("gcc " __VERSION__),
#ifdef NDEBUG
           tr("assertions off")
#else
           tr("debug checks on")
#endif
      );
}

void HelpMenu::showShortcuts() {
  auto* dialog = new QDialog(window_);
  dialog->setObjectName(QStringLiteral("shortcutSheet"));
  dialog->setWindowTitle(tr("Keyboard shortcuts"));
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  auto* text = new QPlainTextEdit(shortcutSheet(), dialog);
  text->setReadOnly(true);
  text->setTabStopDistance(QFontMetricsF(text->font()).horizontalAdvance(QLatin1Char('x')) * 18);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, dialog);
  connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::close);
  auto* layout = new QVBoxLayout(dialog);
  layout->addWidget(text);
  layout->addWidget(buttons);
  dialog->resize(520, 460);
  dialog->open();
}

void HelpMenu::showAbout() {
  QMessageBox::about(window_, tr("About attnscope"), aboutText());
}

}  // namespace attnscope
