// mumoe-studio: the desktop application.
//
//   mumoe-studio [MODEL]                      open MODEL (default: the bundled demo model)
//   mumoe-studio --screenshot FILE [MODEL]    render the main window offscreen to FILE and exit
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QTextStream>
#include <QTimer>

#include "main_window.h"

namespace {

// The demo model: $MUMOE_DEMO_MODEL, else resources/ next to the installed binary, else the
// source tree's resources/ (a build directory run).
QString demoModelPath() {
  const QString fromEnv = qEnvironmentVariable("MUMOE_DEMO_MODEL");
  if (!fromEnv.isEmpty()) return fromEnv;
  const QString name = QStringLiteral("demo/demo.mumoe.safetensors");
  const QString installed = QCoreApplication::applicationDirPath() + QStringLiteral("/../share/mumoe-studio/") + name;
  if (QFileInfo::exists(installed)) return QDir::cleanPath(installed);
  return QStringLiteral(MUMOE_SOURCE_RESOURCES "/") + name;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("mumoe"));
  QApplication::setApplicationName(QStringLiteral("mumoe-studio"));
  QApplication::setApplicationVersion(QStringLiteral(MUMOE_VERSION));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Inspect, test and edit μMoE models"));
  parser.addHelpOption();
  parser.addVersionOption();
  QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                QStringLiteral("Render the window to FILE (PNG) and exit."), QStringLiteral("FILE"));
  parser.addOption(screenshot);
  parser.addPositionalArgument(QStringLiteral("MODEL"), QStringLiteral("Model file to open (default: the demo)"));
  parser.process(app);

  const QString demo = demoModelPath();
  const QString model = parser.positionalArguments().value(0, demo);
  mumoe::ui::MainWindow window(demo);

  if (parser.isSet(screenshot)) {
    window.setErrorDialogsEnabled(false);
    window.resize(1100, 720);
    if (!window.openModel(model)) {
      QTextStream(stderr) << "mumoe-studio: " << window.lastError() << "\n";
      return 2;
    }
    window.show();
    QApplication::processEvents();
    const QString out = parser.value(screenshot);
    if (!window.grab().save(out)) {
      QTextStream(stderr) << "mumoe-studio: cannot write " << out << "\n";
      return 2;
    }
    return 0;
  }

  window.show();
  // Open after the event loop starts so an error dialog has a visible parent.
  QTimer::singleShot(0, &window, [&window, model] { window.openModel(model); });
  return app.exec();
}
