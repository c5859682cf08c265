// The item models of the expert browser under QAbstractItemModelTester, with hand-made core
// answers: the expert table (sorting, the sweep columns, the dead/text filter), the gallery
// model and its lazily loaded thumbnails, and the thumbnail store's memory bound.
#include <QAbstractItemModelTester>
#include <QBarCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QPixmap>
#include <QSignalSpy>
#include <QtTest>

#include "expert_table_model.h"
#include "sample_detail.h"
#include "sweep_chart.h"
#include "gallery_model.h"
#include "thumbnail_store.h"
#include "token_gallery_model.h"
#include "ui_test_registry.h"

using namespace mumoe;

namespace {

analysis::ModeStatistics statistics() {
  analysis::ModeStatistics s;
  s.threshold = 0.5;
  s.samples = 100;
  // expert, load, support, argmax, mean, dead, top classes
  s.experts.push_back({0, 40, 60, 35, 0.30, false, {{1, 30}, {2, 10}}});
  s.experts.push_back({1, 0, 5, 0, 0.01, true, {}});
  s.experts.push_back({2, 25, 50, 20, 0.20, false, {{0, 25}}});
  s.experts.push_back({3, 35, 70, 30, 0.25, false, {{2, 20}, {0, 15}}});
  s.dead_experts = 1;
  return s;
}

analysis::AblationOutcome outcome(int64_t expert, double overallAfter, double poly, bool effect) {
  analysis::AblationOutcome o;
  o.experts = {expert};
  o.after.overall = overallAfter;
  o.after.per_class = {overallAfter, overallAfter, overallAfter};
  o.polysemanticity = poly;
  o.has_effect = effect;
  o.changed_predictions = effect ? 3 : 0;
  return o;
}

analysis::Gallery gallery(int n) {
  analysis::Gallery g;
  g.request.expert = 3;
  g.eligible = n;
  for (int i = 0; i < n; ++i) g.items.push_back({100 + i, i % 3, (i % 4 == 0) ? (i + 1) % 3 : i % 3, 0.9 - 0.01 * i});
  return g;
}

QImage grayImage(int side, int value) {
  QImage image(side, side, QImage::Format_Grayscale8);
  image.fill(value);
  return image;
}

}  // namespace

class ItemModelsTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // Expert numbers under many bars stand upright and whole: Qt elided them to "…" (18 bars of the
  // coefficient chart) and "1…" (experts ≥ 100 in the sweep).
  void chartLabelsOfManyExpertsAreWhole() {
    ui::SampleDetail detail;
    detail.resize(260, 500);
    detail.show();
    detail.showSample(7, QImage(), QStringLiteral("a"), QStringLiteral("a"), 0.5, 3);
    QVector<double> coefficients(128, 0.0);
    for (int n = 100; n < 118; ++n) coefficients[n] = 0.05;
    detail.setCoefficients(7, coefficients);
    const auto axes = detail.chartView()->chart()->axes(Qt::Horizontal);
    QCOMPARE(axes.size(), 1);
    auto* x = qobject_cast<QBarCategoryAxis*>(axes.first());
    QVERIFY(x);
    QCOMPARE(x->count(), 18);
    QVERIFY(!x->truncateLabels());
    QCOMPARE(x->labelsAngle(), -90);

    ui::SweepChart sweep;
    analysis::SweepOutcome outcome;
    analysis::ClassAccuracy before;
    before.per_class = {0.9, 0.8};
    before.overall = 0.85;
    for (int64_t n = 0; n < 40; ++n) {
      analysis::AblationOutcome o;
      o.experts = {100 + n};
      o.after = before;
      o.after.overall = 0.85 - 0.001 * static_cast<double>(n + 1);
      o.has_effect = true;
      o.polysemanticity = 0.5;
      outcome.experts.push_back(o);
    }
    sweep.setSweep(outcome, before);
    auto* sx = qobject_cast<QBarCategoryAxis*>(sweep.chartView()->chart()->axes(Qt::Horizontal).first());
    QVERIFY(sx);
    QVERIFY(!sx->truncateLabels());
  }

  void expertTablePassesTheModelTester() {
    ui::ExpertTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setStatistics(statistics(), {"a", "b", "c"});
    QCOMPARE(model.rowCount(), 4);
    QCOMPARE(model.columnCount(), int(ui::ExpertTableModel::ColumnCount));
    QCOMPARE(model.index(0, ui::ExpertTableModel::TopClasses).data().toString(), QStringLiteral("b 75%, c 25%"));
    QCOMPARE(model.index(1, ui::ExpertTableModel::TopClasses).data().toString(), QStringLiteral("dead (load 0)"));
    QCOMPARE(model.index(3, ui::ExpertTableModel::Load).data(ui::ExpertTableModel::SortRole).toLongLong(), 35);
    QCOMPARE(model.index(1, 0).data(ui::ExpertTableModel::DeadRole).toBool(), true);
    // Before the sweep the sweep columns say they are pending.
    QCOMPARE(model.index(0, ui::ExpertTableModel::Polysemanticity).data().toString(), QStringLiteral("…"));

    analysis::SweepOutcome sweep;
    sweep.experts = {outcome(0, 0.80, 0.5, true), outcome(1, 0.90, 0, false), outcome(2, 0.85, 0.25, true),
                     outcome(3, 0.90, 0, false)};
    analysis::ClassAccuracy before;
    before.overall = 0.9;
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    model.setSweep(sweep, before);
    QCOMPARE(changed.count(), 1);
    QVERIFY(model.hasSweep());
    QCOMPARE(model.index(0, ui::ExpertTableModel::Polysemanticity).data().toString(), QLocale().toString(0.5, 'f', 3));
    QCOMPARE(model.index(1, ui::ExpertTableModel::Polysemanticity).data().toString(), QStringLiteral("—"));
    QVERIFY(qAbs(model.index(0, ui::ExpertTableModel::AccuracyChange).data(ui::ExpertTableModel::SortRole).toDouble() + 10.0) < 1e-9);
    // A sweep of another mode is not shown.
    sweep.mode = 1;
    model.setSweep(sweep, before);
    model.setStatistics(statistics(), {"a", "b", "c"});
    QVERIFY(model.hasSweep());
    model.clear();
    QCOMPARE(model.rowCount(), 0);
  }

  void tokenGalleryPassesTheModelTester() {
    ui::TokenGalleryModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    analysis::TokenGallery gallery;
    analysis::TokenGalleryItem first;
    first.sequence = 3;
    first.position = 17;
    first.target = 42;
    first.prediction = 42;
    first.coefficient = 0.875;
    first.context.before = "The c";
    first.context.token = "a";
    first.context.after = "t sat";
    analysis::TokenGalleryItem second = first;
    second.prediction = 7;
    second.context.token = "o";
    gallery.items = {first, second};
    model.setGallery(gallery);
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(model.rowCount(model.index(0, 0)), 0);  // a list: no children
    QCOMPARE(model.index(0, 0).data().toString(), QStringLiteral("The c«a»t sat"));
    QCOMPARE(model.index(0, 0).data(ui::TokenGalleryModel::TokenRole).toString(), QStringLiteral("a"));
    QCOMPARE(model.index(1, 0).data(ui::TokenGalleryModel::TokenRole).toString(), QStringLiteral("o"));
    QCOMPARE(model.index(0, 0).data(ui::TokenGalleryModel::CoefficientRole).toDouble(), 0.875);
    QCOMPARE(model.index(0, 0).data(ui::TokenGalleryModel::PositionRole).toString(), QStringLiteral("seq 3 · pos 17"));
    QVERIFY(model.index(0, 0).data(ui::TokenGalleryModel::CorrectRole).toBool());
    QVERIFY(!model.index(1, 0).data(ui::TokenGalleryModel::CorrectRole).toBool());
    QVERIFY(!model.index(2, 0).isValid());
    model.setGallery({});
    QCOMPARE(model.rowCount(), 0);
  }

  void expertFilterSortsAndFilters() {
    ui::ExpertTableModel model;
    ui::ExpertFilterProxy proxy;
    proxy.setSourceModel(&model);
    QAbstractItemModelTester tester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setStatistics(statistics(), {"shirt", "bag", "coat"});
    proxy.sort(ui::ExpertTableModel::Load, Qt::DescendingOrder);
    QCOMPARE(proxy.index(0, 0).data(ui::ExpertTableModel::ExpertRole).toLongLong(), 0);
    QCOMPARE(proxy.index(1, 0).data(ui::ExpertTableModel::ExpertRole).toLongLong(), 3);
    proxy.setHideDead(true);
    QCOMPARE(proxy.rowCount(), 3);
    proxy.setFilterText(QStringLiteral("COAT"));  // experts 0 and 3 have coat among their top classes
    QCOMPARE(proxy.rowCount(), 2);
    proxy.setFilterText(QStringLiteral("2"));  // an expert number
    QCOMPARE(proxy.rowCount(), 1);
    QCOMPARE(proxy.index(0, 0).data(ui::ExpertTableModel::ExpertRole).toLongLong(), 2);
    proxy.setFilterText({});
    proxy.setHideDead(false);
    QCOMPARE(proxy.rowCount(), 4);
  }

  void galleryModelLoadsThumbnailsLazily() {
    ui::ThumbnailStore store;
    ui::GalleryModel model(&store);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy wanted(&store, &ui::ThumbnailStore::imagesWanted);
    model.setGallery(gallery(12), {"t-shirt", "trouser", "bag"});
    QCOMPARE(model.rowCount(), 12);
    QCOMPARE(model.index(1).data(ui::GalleryModel::LabelNameRole).toString(), QStringLiteral("trouser"));
    QCOMPARE(model.index(4).data(ui::GalleryModel::CorrectRole).toBool(), false);
    QCOMPARE(model.index(0).data(ui::GalleryModel::CoefficientRole).toDouble(), 0.9);
    // Nothing is asked until a cell is painted (DecorationRole).
    QCoreApplication::processEvents();
    QCOMPARE(wanted.count(), 0);
    QVERIFY(model.index(2).data(Qt::DecorationRole).isNull());
    QVERIFY(model.index(3).data(Qt::DecorationRole).isNull());
    QVERIFY(model.index(2).data(Qt::DecorationRole).isNull());  // asked once only
    QTRY_COMPARE(wanted.count(), 1);
    QCOMPARE(wanted.first().first().value<QVector<qint64>>(), (QVector<qint64>{102, 103}));
    QCOMPARE(store.pendingCount(), 2);

    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    store.insert({{102, grayImage(28, 200)}, {103, grayImage(28, 50)}});
    QCOMPARE(changed.count(), 1);
    QCOMPARE(store.pendingCount(), 0);
    const auto pixmap = model.index(2).data(Qt::DecorationRole).value<QPixmap>();
    QVERIFY(!pixmap.isNull());
    QCOMPARE(pixmap.width(), 28 * (model.thumbnailSide() / 28));  // integer, crisp scaling
    model.clear();
    QCOMPARE(model.rowCount(), 0);
  }

  void thumbnailStoreMemoryIsBounded() {
    ui::ThumbnailStore store(64 * 1024);  // 64 KiB of source images
    QHash<qint64, QImage> images;
    for (int i = 0; i < 200; ++i) images.insert(i, grayImage(64, i));  // 4 KiB each: 800 KiB in all
    store.insert(images);
    QVERIFY2(store.sourceKiB() <= 64, qPrintable(QString::number(store.sourceKiB())));
    int kept = 0;
    for (int i = 0; i < 200; ++i) kept += store.contains(i);
    QVERIFY(kept > 0 && kept <= 16);
    // clear() forgets everything; the next miss asks again.
    store.clear();
    QSignalSpy wanted(&store, &ui::ThumbnailStore::imagesWanted);
    QVERIFY(store.thumbnail(5, 64).isNull());
    QTRY_COMPARE(wanted.count(), 1);
  }

  void scalingKeepsSmallImagesCrisp() {
    const QImage up = ui::scaleForThumbnail(grayImage(28, 9), 96);
    QCOMPARE(up.size(), QSize(84, 84));
    const QImage down = ui::scaleForThumbnail(grayImage(300, 9), 96);
    QCOMPARE(down.size(), QSize(96, 96));
    QVERIFY(ui::scaleForThumbnail(QImage(), 96).isNull());
  }
};

MUMOE_UI_TEST(ItemModelsTest)
#include "test_item_models.moc"
