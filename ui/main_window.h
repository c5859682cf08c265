// The main window: opens a model file (dialog, drag and drop, recent files, the bundled demo)
// and shows its μMoE layers and provenance. Heavier views (galleries, ablation, bias) hang off
// this window in later milestones.
#pragma once

#include <QMainWindow>
#include <QString>
#include <QStringList>

class QLabel;
class QMenu;
class QTableView;
class QTextBrowser;

namespace mumoe::ui {

class ModelOverviewModel;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  /// `demoModelPath` is what File ▸ Open Demo Model opens ("" hides the action).
  explicit MainWindow(QString demoModelPath = {}, QWidget* parent = nullptr);
  ~MainWindow() override;

  /// Opens a model file. On failure the current model stays open, lastError() names the file
  /// and the problem, and (if enabled) an error dialog shows it. Never throws.
  bool openModel(const QString& path);
  QString lastError() const { return lastError_; }
  QString currentModelPath() const { return currentPath_; }

  /// Tests and --screenshot turn modal error dialogs off.
  void setErrorDialogsEnabled(bool enabled) { errorDialogs_ = enabled; }

  ModelOverviewModel* overviewModel() const { return overview_; }
  QTableView* layerTable() const { return table_; }
  QTextBrowser* detailsView() const { return details_; }

 Q_SIGNALS:
  void modelOpened(const QString& path);

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  void closeEvent(QCloseEvent* event) override;

 private:
  void buildMenus();
  void chooseAndOpenModel();
  void showLayerDetails();
  void rememberRecent(const QString& path);
  void rebuildRecentMenu();
  void showError(const QString& message);

  QString demoModelPath_;
  QString currentPath_;
  QString lastError_;
  bool errorDialogs_ = true;
  ModelOverviewModel* overview_ = nullptr;
  QTableView* table_ = nullptr;
  QTextBrowser* details_ = nullptr;
  QLabel* statusLabel_ = nullptr;
  QMenu* recentMenu_ = nullptr;
};

}  // namespace mumoe::ui
