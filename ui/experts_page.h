// ExpertsPage: the expert browser — a sortable, filterable table of the experts of one expert
// mode (ExpertTableModel behind ExpertFilterProxy) beside the gallery of the selected expert
// (GalleryView). It only shows and asks; the main window answers its requests through the
// SessionController.
#pragma once

#include <QStringList>
#include <QVector>
#include <QWidget>

#include "analysis/ablation_results.h"
#include "analysis/expert_statistics.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QSplitter;
class QTableView;

namespace mumoe::ui {

class ExpertFilterProxy;
class ExpertTableModel;
class GalleryView;
class ThumbnailStore;
struct SessionInfo;

class ExpertsPage : public QWidget {
  Q_OBJECT

 public:
  explicit ExpertsPage(ThumbnailStore* store, QWidget* parent = nullptr);

  /// A new session: layers and modes to choose from; the table empties until setStatistics.
  /// `layers` are the model's μMoE layers (the picker shows when there are several).
  void setSession(const SessionInfo& info, const QStringList& layers = {});
  void setStatistics(const analysis::ModeStatistics& statistics);
  void setSweep(const analysis::SweepOutcome& sweep, const analysis::ClassAccuracy& before);
  /// "Extracting…", an error, …: shown instead of the table's summary line.
  void setMessage(const QString& html);
  /// The summary line's text (a message or the table's summary).
  QString message() const;
  void clear();

  qint64 mode() const;
  /// The layer picked ("" when the model has one μMoE layer).
  QString layer() const;
  double threshold() const;
  /// The expert of the current row (-1: none).
  qint64 currentExpert() const;
  /// The experts of the selected rows, ascending.
  QVector<qint64> selectedExperts() const;
  /// Makes `expert` the current row (clears the text filter if it hides the expert).
  bool selectExpert(qint64 expert);

  QTableView* table() const { return table_; }
  ExpertTableModel* model() const { return model_; }
  ExpertFilterProxy* proxy() const { return proxy_; }
  GalleryView* gallery() const { return gallery_; }
  QSplitter* splitter() const { return splitter_; }
  QCheckBox* hideDeadBox() const { return hideDead_; }
  QLineEdit* filterEdit() const { return filter_; }
  QComboBox* layerBox() const { return layer_; }

 Q_SIGNALS:
  void statisticsWanted(qint64 mode, double threshold);
  /// The user picked another μMoE layer: the main window analyses it.
  void layerWanted(const QString& layer);
  void currentExpertChanged(qint64 expert);
  void ablateRequested(const QVector<qint64>& experts);

 private:
  /// After the filter changed: `expert` (the one selected before) again if still shown, else the
  /// first row shown (none when none was selected); the gallery follows.
  void reselectAfterFilter(qint64 expert);
  void contextMenu(const QPoint& pos);
  void updateSummary();

  QComboBox* layer_ = nullptr;
  QComboBox* mode_ = nullptr;
  QDoubleSpinBox* threshold_ = nullptr;
  QLineEdit* filter_ = nullptr;
  QCheckBox* hideDead_ = nullptr;
  QLabel* summary_ = nullptr;
  QTableView* table_ = nullptr;
  ExpertTableModel* model_ = nullptr;
  ExpertFilterProxy* proxy_ = nullptr;
  GalleryView* gallery_ = nullptr;
  QSplitter* splitter_ = nullptr;
  QStringList classNames_;
  QString requestedLayer_;  ///< the layer last opened or asked for
  bool imagesByPatch_ = false;  ///< a ViT block: an image counts by its strongest patch
  bool imagesByChannel_ = false;  ///< a Mixer's token-mixing layer: images count by a channel
};

}  // namespace mumoe::ui
