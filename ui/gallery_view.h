// GalleryView: the gallery of the selected expert — controls (random draw among a_n ≥ threshold
// or top-ranked, threshold, count, seed, a subpopulation of the data's attributes where it has
// some, thumbnail size), the thumbnails in a QListView over
// GalleryModel (lazily loaded through the ThumbnailStore; only visible cells ask for images), and
// the clicked sample enlarged with its coefficient vector (SampleDetail).
#pragma once

#include <QStringList>
#include <QWidget>

#include "analysis/gallery.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QListView;
class QSlider;
class QSpinBox;

namespace mumoe::ui {

class GalleryDelegate;
class GalleryModel;
class SampleDetail;
class ThumbnailStore;
struct AnswerTiming;

class GalleryView : public QWidget {
  Q_OBJECT

 public:
  explicit GalleryView(ThumbnailStore* store, QWidget* parent = nullptr);

  /// The expert whose gallery is wanted (-1: none); emits requestChanged when it changes.
  void setExpert(qint64 mode, qint64 expert);
  qint64 expert() const { return expert_; }
  /// The request the controls describe for the current expert.
  analysis::GalleryRequest request() const;
  /// Shows an answer (ignored when it is not for the current request).
  void setGallery(const analysis::Gallery& gallery, const QStringList& classNames, const AnswerTiming& timing);
  void clear(const QString& message = {});
  void setOrder(analysis::GalleryOrder order);
  void setCount(int count);
  /// The data's binary attributes: the subpopulation field shows when there are some (and is
  /// emptied: a filter of the previous data would name other attributes).
  void setAttributes(const QStringList& names);
  /// Restricts the gallery to a subpopulation ("long_sleeves=1&frame=1"; "" = every sample), as
  /// typing it and pressing Return does. False (and the field marked) when the text does not parse.
  bool setSubpopulation(const QString& text);
  QLineEdit* subpopulationEdit() const { return subpopulation_; }

  GalleryModel* model() const { return model_; }
  QListView* listView() const { return list_; }
  SampleDetail* detail() const { return detail_; }
  /// Shows `row` enlarged (as a click does).
  void activateRow(int row);

 Q_SIGNALS:
  void requestChanged();
  /// A sample was clicked: the page fetches its coefficient vector.
  void sampleActivated(qint64 sample);
  void ablateRequested(qint64 expert);
  void exportRequested();
  /// A bar of the sample's coefficient chart was clicked: the page selects that expert.
  void expertChosen(qint64 expert);

 private:
  void contextMenu(const QPoint& pos);

  ThumbnailStore* store_;
  GalleryModel* model_ = nullptr;
  GalleryDelegate* delegate_ = nullptr;
  QListView* list_ = nullptr;
  SampleDetail* detail_ = nullptr;
  QLabel* title_ = nullptr;
  QComboBox* order_ = nullptr;
  QDoubleSpinBox* threshold_ = nullptr;
  QSpinBox* count_ = nullptr;
  QSpinBox* seed_ = nullptr;
  QLineEdit* subpopulation_ = nullptr;
  QString subpopulationText_;  ///< canonical (editing::Subpopulation::text), "" = none
  QStringList attributes_;     ///< the data's, which the filter may name
  QSlider* zoom_ = nullptr;
  qint64 mode_ = 0;
  qint64 expert_ = -1;
  qint64 detailKey_ = -1;  ///< the ThumbnailStore key of the picture the detail shows
};

}  // namespace mumoe::ui
