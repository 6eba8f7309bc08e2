// Integer ticks of an index axis (see IndexTicker.h).
#include "app/plot/IndexTicker.h"

#include <qcustomplot.h>

namespace attnscope {

QSharedPointer<QCPAxisTicker> indexTicker() {
  QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
  ticker->setTickStep(1.0);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  return ticker;
}

}  // namespace attnscope
