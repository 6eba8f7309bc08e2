// A heatmap of one matrix (S, P, dP, dS, O, dQ, ...): one image (HeatmapImage) of colormapped
// finite values with NaN, +inf, -inf and masked cells in four distinct colours, a legend of their
// counts, a colour scale with linear / log / symlog mapping and a range histogram, zoom and
// pan that ask for a recompute of the visible window, hover readout, click to pin and an outline
// of the backward stepper's current tile.
#pragma once

#include <QMap>
#include <QWidget>
#include <memory>
#include <optional>
#include <vector>

#include "app/plot/Colormaps.h"
#include "core/view/head_view.h"
#include "core/view/matrix_grid.h"

class QComboBox;
class QCustomPlot;
class QCPColorScale;
class QCPGraph;
class QCPItemRect;
class QCPTextElement;
class QMouseEvent;
class QTimer;

namespace attnscope {

class HeatmapImage;
class RangeHistogram;
class ScaleTicker;

// What the rows and the columns of a map are ("query i" x "key j", "batch" x "head", ...).
struct HeatmapAxes {
  QString rows, cols;
};

class HeatmapView : public QWidget {
  Q_OBJECT

 public:
  HeatmapView(const QString& name, ColormapKind colormap, const HeatmapAxes& axes,
              QWidget* parent = nullptr);
  // A head view: its name, axis labels and starting colormap (sequential for P).
  explicit HeatmapView(HeadView view, QWidget* parent = nullptr);
  ~HeatmapView() override;

  const QString& name() const { return name_; }

  // Shows a grid. resetView zooms out to the whole matrix; otherwise the axes stay where the
  // user left them (a recompute of the zoomed window arrives this way).
  void setGrid(std::shared_ptr<const MatrixGrid> grid, bool resetView);
  void clear();
  const MatrixGrid* grid() const { return grid_.get(); }
  const std::shared_ptr<const MatrixGrid>& sharedGrid() const { return grid_; }

  // Elements per overlay class in the grid shown, and cells drawn in each overlay colour.
  CellCounts overlayCounts() const;
  int64_t overlayCells(CellClass cls) const;
  // Cells with a finite value outside the colour range (drawn in the end colours; the legend's
  // "beyond range" count).
  int64_t beyondRangeCells() const { return beyondRange_; }

  // For maps whose rows and columns are indices (batch x head, step x layer): integer ticks and
  // no range histogram or overlay legend (the panel says what its cell colours mean).
  void setIndexMap();
  // The row axis of an index map: its label and, when given, names at some rows instead of the
  // integer ticks ("rank 1" at the first row of that rank's block).
  void setRowAxis(const QString& label, const QMap<double, QString>& names = {});

  // Title line drawn above the map and into exports (file, case, batch/head, settings).
  void setStamp(const QString& stamp);
  QString stamp() const { return stamp_; }

  // A colormap the user chose; setAutomaticColormap() goes back to the one the values call
  // for (colormapFor: sequential when one-signed, diverging around 0 otherwise), the default.
  void setColormap(ColormapKind kind);
  void setAutomaticColormap();
  bool automaticColormap() const { return colormapAuto_; }
  void setScaleKind(ScaleKind kind);
  // Fixed colour range in data units (turns auto off), or back to automatic.
  void setColorRange(double lo, double hi);
  void setAutoRange();
  bool automaticRange() const { return autoRange_; }
  const ColorScale& colorScale() const { return scale_; }
  // The user's colour choices, and all of them at once (one redraw). coloursChanged follows
  // every change (toolbar, histogram, colour bar or a call).
  HeatmapColours colours() const;
  void setColours(const HeatmapColours& colours);
  RangeHistogram* histogram() const { return histogram_; }
  // The plot and its image (tests read pixels and cell colours through them).
  QCustomPlot* plot() const { return plot_; }
  HeatmapImage* image() const { return image_; }

  // The window the axes show (clamped to the matrix), and the map's size in pixels.
  MatrixWindow visibleWindow() const;
  QSize plotPixelSize() const;

  // Writes the figure (PNG / PDF by suffix) atomically; false with a message on failure.
  bool exportTo(const QString& path, QString* error);

  // Zooms the axes to a window as the user would (viewWindowChanged follows, debounced).
  void zoomTo(const MatrixWindow& window);
  // Shows the whole matrix again (Home, double-click); viewWindowChanged follows at once.
  void resetZoom();

  // Outlines a block of elements (the backward stepper's current tile); nullopt removes it.
  void setHighlight(const std::optional<MatrixWindow>& block);
  std::optional<MatrixWindow> highlight() const { return highlight_; }

  // Emits cellHovered / cellClicked for element (row, col) as the mouse would.
  void hoverCell(int64_t row, int64_t col);
  void clickCell(int64_t row, int64_t col);

 protected:
  void showEvent(QShowEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 signals:
  void cellHovered(const attnscope::CellReadout& readout);
  void cellClicked(const attnscope::CellReadout& readout);
  // The user zoomed or panned (debounced); the window is clamped to the matrix.
  void viewWindowChanged(const attnscope::MatrixWindow& window);
  void coloursChanged();

 private:
  void buildPlot(const HeatmapAxes& axes);
  // The title line: the plot's window title (name and stamp), elided in the middle to fit.
  void elideTitle();
  // Shows `kind` in the gradient and the colormap box (no redraw).
  void showColormap(ColormapKind kind);
  // Shows `kind` in the ticker and the scale box (no redraw).
  void showScaleKind(ScaleKind kind);
  void buildToolbar(QWidget* bar);
  void redraw();
  void fill();
  void requestReplot();
  void updateLegend();
  // Wraps the legend into as many rows as the plot's width needs: no entry is ever cut.
  void fitLegend();
  void resetAxes();
  void onAxisRangeChanged();
  // Keeps both axes within the matrix (wheel zoom and drags cannot run past it).
  void clampAxes();
  void onMouseMove(QMouseEvent* event);
  void onMousePress(QMouseEvent* event);
  void onMouseRelease(QMouseEvent* event);
  bool elementAt(const QPoint& pos, int64_t* row, int64_t* col) const;

  QString name_;
  QString stamp_;
  std::shared_ptr<const MatrixGrid> grid_;
  ColorScale scale_;
  bool autoRange_ = true;
  bool colormapAuto_ = true;
  bool applyingRange_ = false;
  bool applyingScale_ = false;  // fill() sets the colour bar's range (not a user drag)
  QPoint pressPos_;
  std::optional<MatrixWindow> highlight_;
  bool unfilled_ = true;  // the image, colour bar and histogram do not show grid_ / scale_ yet
  bool stale_ = false;    // hidden changes wait for the next show
  // What the histogram shows (recomputed only when the grid or the scale changes), and the
  // reused buffer of display-space values.
  std::weak_ptr<const MatrixGrid> histGrid_;
  ScaleKind histScale_ = ScaleKind::linear;
  double histLinthresh_ = 0;
  std::vector<double> display_;

  QCustomPlot* plot_ = nullptr;
  HeatmapImage* image_ = nullptr;
  QCPColorScale* colorScale_ = nullptr;
  QSharedPointer<ScaleTicker> ticker_;
  QCPTextElement* title_ = nullptr;
  QCPItemRect* highlightRect_ = nullptr;
  QCPGraph* legendEntries_[4] = {};
  QCPGraph* beyondEntry_ = nullptr;
  int64_t beyondRange_ = 0;  // cells whose finite value lies outside the colour range
  RangeHistogram* histogram_ = nullptr;
  QComboBox* colormapBox_ = nullptr;
  QComboBox* scaleBox_ = nullptr;
  QTimer* zoomTimer_ = nullptr;
};

}  // namespace attnscope
