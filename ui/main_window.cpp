#include "main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStatusBar>
#include <QTableView>
#include <QTextBrowser>

#include <exception>

#include "format.h"
#include "model_overview_model.h"

namespace mumoe::ui {
namespace {

constexpr int kMaxRecentFiles = 8;
const char* kRecentKey = "recentFiles";

QString htmlRow(const QString& key, const QString& value) {
  return QStringLiteral("<tr><td style='color:#666;padding-right:12px'>%1</td><td>%2</td></tr>")
      .arg(key.toHtmlEscaped(), value.toHtmlEscaped());
}

}  // namespace

MainWindow::MainWindow(QString demoModelPath, QWidget* parent)
    : QMainWindow(parent), demoModelPath_(std::move(demoModelPath)) {
  setWindowTitle(tr("mumoe-studio"));
  setAcceptDrops(true);

  overview_ = new ModelOverviewModel(this);
  auto* proxy = new QSortFilterProxyModel(this);
  proxy->setSourceModel(overview_);
  proxy->setSortRole(ModelOverviewModel::SortRole);

  table_ = new QTableView;
  table_->setModel(proxy);
  table_->setSortingEnabled(true);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(false);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(ModelOverviewModel::Gating, QHeaderView::Stretch);

  details_ = new QTextBrowser;
  details_->setOpenLinks(false);
  details_->setPlaceholderText(tr("Open a model (File ▸ Open, or drop a .safetensors file here)."));

  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->addWidget(table_);
  splitter->addWidget(details_);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 2);
  setCentralWidget(splitter);

  statusLabel_ = new QLabel(tr("No model open"));
  statusBar()->addWidget(statusLabel_, 1);

  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this] { showLayerDetails(); });
  buildMenus();

  QSettings settings;
  restoreGeometry(settings.value("mainWindow/geometry").toByteArray());
  if (!settings.contains("mainWindow/geometry")) resize(1100, 720);
}

MainWindow::~MainWindow() = default;

void MainWindow::buildMenus() {
  auto* file = menuBar()->addMenu(tr("&File"));
  auto* open = file->addAction(tr("&Open Model…"), this, &MainWindow::chooseAndOpenModel);
  open->setShortcut(QKeySequence::Open);
  if (!demoModelPath_.isEmpty())
    file->addAction(tr("Open &Demo Model"), this, [this] { openModel(demoModelPath_); });
  recentMenu_ = file->addMenu(tr("Open &Recent"));
  rebuildRecentMenu();
  file->addSeparator();
  auto* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  auto* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About mumoe-studio"), this, [this] {
    QMessageBox::about(this, tr("About mumoe-studio"),
                       tr("<b>mumoe-studio</b><br>Inspect, test and edit Multilinear "
                          "Mixture-of-Experts (μMoE) models."));
  });
}

bool MainWindow::openModel(const QString& path) {
  model::ModelSummary summary;
  try {
    summary = model::summarize_model_file(path.toStdString());
  } catch (const std::exception& e) {
    lastError_ = QString::fromUtf8(e.what());
    showError(lastError_);
    return false;
  }
  lastError_.clear();
  currentPath_ = QFileInfo(path).absoluteFilePath();
  overview_->setSummary(summary);
  setWindowTitle(tr("%1 — mumoe-studio").arg(QFileInfo(path).fileName()));
  statusLabel_->setText(tr("%n μMoE layer(s) · %1 parameters · %2", nullptr, static_cast<int>(summary.layers.size()))
                            .arg(groupedNumber(summary.total_parameters()), currentPath_));
  table_->selectRow(0);
  showLayerDetails();
  rememberRecent(currentPath_);
  Q_EMIT modelOpened(currentPath_);
  return true;
}

void MainWindow::chooseAndOpenModel() {
  const QString path = QFileDialog::getOpenFileName(
      this, tr("Open Model"), QFileInfo(currentPath_).absolutePath(),
      tr("Model files (*.safetensors);;All files (*)"));
  if (!path.isEmpty()) openModel(path);
}

void MainWindow::showLayerDetails() {
  const auto& summary = overview_->summary();
  const QModelIndex current = table_->currentIndex();
  if (summary.layers.empty()) {
    details_->clear();
    return;
  }
  auto* proxy = static_cast<QSortFilterProxyModel*>(table_->model());
  const int row = current.isValid() ? proxy->mapToSource(current).row() : 0;
  const auto& layer = summary.layers[static_cast<size_t>(row)];
  const auto& c = layer.config;

  QString html = QStringLiteral("<h3>Layer %1</h3><table>").arg(QString::fromStdString(layer.name).toHtmlEscaped());
  html += htmlRow(tr("Variant"), QString::fromStdString(c.variant_name()) +
                                     (c.is_block() ? tr(" two-layer block (shared coefficients)") : tr(" layer")));
  html += htmlRow(tr("Expert modes"), QStringLiteral("%1 (hierarchy %2)").arg(joinDims(c.expert_dims)).arg(c.hierarchy()));
  html += htmlRow(tr("Total experts"), groupedNumber(c.total_experts()));
  html += htmlRow(tr("Ranks"), rankText(c));
  html += htmlRow(tr("Shape"), shapeText(c) + (c.use_bias ? tr(" (per-expert bias)") : tr(" (no bias)")));
  html += htmlRow(tr("Gating"), gatingText(c));
  html += htmlRow(tr("Tensor prefix"), layer.prefix.empty() ? tr("(top level)") : QString::fromStdString(layer.prefix));
  html += htmlRow(tr("Parameters"), tr("%1 (factors %2, gating %3%4)")
                                        .arg(groupedNumber(layer.parameters.total()), groupedNumber(layer.parameters.factors),
                                             groupedNumber(layer.parameters.gating),
                                             layer.parameters.input_norm ? tr(", input norm %1").arg(groupedNumber(layer.parameters.input_norm))
                                                                         : QString()));
  html += QStringLiteral("</table><h3>%1</h3><table>").arg(tr("Model file"));
  html += htmlRow(tr("File"), QString::fromStdString(summary.path));
  html += htmlRow(tr("Size"), tr("%1 bytes").arg(groupedNumber(static_cast<int64_t>(summary.file_bytes))));
  html += htmlRow(tr("Format"), summary.inferred ? tr("PyTorch state_dict (configuration inferred)")
                                                 : tr("mumoe model file, version %1").arg(summary.format_version));
  html += htmlRow(tr("Architecture"), QString::fromStdString(summary.architecture));
  const auto provenance = QJsonDocument::fromJson(QByteArray::fromStdString(summary.provenance_json)).object();
  const auto test = provenance.value(QStringLiteral("test_metrics")).toObject();
  if (test.contains(QStringLiteral("accuracy")))
    html += htmlRow(tr("Test accuracy"), tr("%1 % on %2 (%3 samples)")
                                             .arg(test.value(QStringLiteral("accuracy")).toDouble() * 100, 0, 'f', 2)
                                             .arg(test.value(QStringLiteral("data")).toString())
                                             .arg(test.value(QStringLiteral("samples")).toInt()));
  auto list = [](const std::vector<std::string>& names) {
    QStringList out;
    for (const auto& n : names) out << QString::fromStdString(n);
    return out.isEmpty() ? QObject::tr("—") : out.join(QStringLiteral(", "));
  };
  html += htmlRow(tr("Labels"), list(summary.label_names));
  html += htmlRow(tr("Attributes"), list(summary.attribute_names));
  html += QStringLiteral("</table><h3>%1</h3><pre>%2</pre>")
              .arg(tr("Provenance"),
                   QString::fromUtf8(QJsonDocument::fromJson(QByteArray::fromStdString(summary.provenance_json))
                                         .toJson(QJsonDocument::Indented))
                       .toHtmlEscaped());
  details_->setHtml(html);
}

void MainWindow::rememberRecent(const QString& path) {
  QSettings settings;
  QStringList recent = settings.value(kRecentKey).toStringList();
  recent.removeAll(path);
  recent.prepend(path);
  while (recent.size() > kMaxRecentFiles) recent.removeLast();
  settings.setValue(kRecentKey, recent);
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  recentMenu_->clear();
  const QStringList recent = QSettings().value(kRecentKey).toStringList();
  for (const QString& path : recent)
    recentMenu_->addAction(QFileInfo(path).fileName(), this, [this, path] { openModel(path); })->setToolTip(path);
  recentMenu_->setEnabled(!recent.isEmpty());
}

void MainWindow::showError(const QString& message) {
  statusBar()->showMessage(message, 10000);
  if (errorDialogs_) QMessageBox::critical(this, tr("Cannot open model"), message);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  const auto urls = event->mimeData()->urls();
  if (!urls.isEmpty() && urls.first().isLocalFile()) openModel(urls.first().toLocalFile());
}

void MainWindow::closeEvent(QCloseEvent* event) {
  QSettings().setValue("mainWindow/geometry", saveGeometry());
  QMainWindow::closeEvent(event);
}

}  // namespace mumoe::ui
