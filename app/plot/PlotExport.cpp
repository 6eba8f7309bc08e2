// PNG / PDF export of a QCustomPlot through a temporary file and an atomic rename.
#include "app/plot/PlotExport.h"

#include <qcustomplot.h>

#include <QFileInfo>
#include <QTemporaryFile>
#include <cstdio>

namespace attnscope {

QStringList exportFormats() {
  return {QStringLiteral("png"), QStringLiteral("pdf")};
}

bool exportPlot(QCustomPlot* plot, const QString& path, QString* error) {
  const QFileInfo target(path);
  const QString suffix = target.suffix().toLower();
  if (!exportFormats().contains(suffix)) {
    if (error) {
      *error = QStringLiteral("%1: unsupported export format '%2' (use %3)")
                   .arg(path, suffix, exportFormats().join(QStringLiteral(", ")));
    }
    return false;
  }
  // The temporary file lives in the target's directory so that the rename stays atomic.
  QTemporaryFile temp(target.absolutePath() + QStringLiteral("/.attnscope-export-XXXXXX.") +
                      suffix);
  if (!temp.open()) {
    if (error) *error = QStringLiteral("%1: cannot write: %2").arg(path, temp.errorString());
    return false;
  }
  const QString tempPath = temp.fileName();
  temp.close();
  const bool written = suffix == QStringLiteral("png")
                           ? plot->savePng(tempPath, 0, 0, 2.0)
                           : plot->savePdf(tempPath, 0, 0, QCP::epAllowCosmetic,
                                           QStringLiteral("attnscope"), plot->windowTitle());
  if (!written || QFileInfo(tempPath).size() == 0) {
    if (error) *error = QStringLiteral("%1: the renderer could not write the figure").arg(path);
    return false;
  }
  // QTemporaryFile creates the file owner-only; an exported figure is an ordinary file.
  QFile::setPermissions(tempPath, QFileDevice::ReadOwner | QFileDevice::WriteOwner |
                                      QFileDevice::ReadGroup | QFileDevice::ReadOther);
  if (std::rename(QFile::encodeName(tempPath).constData(),
                  QFile::encodeName(target.absoluteFilePath()).constData()) != 0) {
    if (error) *error = QStringLiteral("%1: cannot replace the file").arg(path);
    return false;
  }
  temp.setAutoRemove(false);
  return true;
}

}  // namespace attnscope
