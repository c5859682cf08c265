// mumoe-studio: the desktop application.
//
//   mumoe-studio [MODEL]                              open MODEL (default: the bundled demo model, on
//                                                     fashion-mnist:test)
//   mumoe-studio --data SPEC [MODEL]                  … on another data set (default: the last used)
//   mumoe-studio --layer NAME [MODEL]                 … analysing that μMoE layer (e.g. a ViT block's
//                                                     blocks.3.mlp) instead of the first
//   mumoe-studio --screenshot FILE [--view V] [MODEL] render view V (model, gallery, ablation,
//                                                     bias — a multi-label model such as demo 2 —,
//                                                     tokens, steering — a μMoE GPT —, compare — every MODEL
//                                                     given on the Compare page) offscreen to FILE (PNG)
//                                                     once its data is there, and exit (0 written,
//                                                     2 error; --screenshot-timeout S: wait at most
//                                                     S seconds for the data, default 180)
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QIcon>
#include <QTextStream>
#include <QTimer>

#include <csignal>
#include <cstring>

#include "main_window.h"
#include "io/output_files.h"
#include "io/allocator_tuning.h"
#include "screenshot_driver.h"

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

// The command line, parsed the same way whether a display exists or not.
struct StudioCommandLine {
  QCommandLineParser parser;
  QCommandLineOption screenshot{QStringLiteral("screenshot"),
                                QStringLiteral("Render the view offscreen to FILE (PNG) once its data is there, and exit."),
                                QStringLiteral("FILE")};
  QCommandLineOption view{QStringLiteral("view"),
                          QStringLiteral("View for --screenshot: model, gallery (default), ablation, bias, tokens, steering, compare (every MODEL given)."),
                          QStringLiteral("VIEW"), QStringLiteral("gallery")};
  QCommandLineOption data{QStringLiteral("data"), QStringLiteral("Data SPEC (default: the last used, fashion-mnist:test)."),
                          QStringLiteral("SPEC")};
  QCommandLineOption size{QStringLiteral("size"), QStringLiteral("Window size for --screenshot (default 1400x860)."),
                          QStringLiteral("WxH"), QStringLiteral("1400x860")};
  QCommandLineOption layer{QStringLiteral("layer"),
                           QStringLiteral("μMoE layer to analyse (default: the model's first), e.g. blocks.3.mlp of a ViT."),
                           QStringLiteral("NAME")};
  QCommandLineOption subpop{QStringLiteral("subpop"),
                            QStringLiteral("For --screenshot: the gallery shows only this subpopulation of the data's "
                                           "attributes, e.g. long_sleeves=1&frame=1."),
                            QStringLiteral("CONDITIONS")};
  QCommandLineOption screenshotTimeout{
      QStringLiteral("screenshot-timeout"),
      QStringLiteral("Seconds --screenshot waits for the view's data before giving up (default 180)."),
      QStringLiteral("SECONDS")};

  StudioCommandLine() {
    parser.setApplicationDescription(QStringLiteral("Inspect, test and edit μMoE models"));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addOptions({screenshot, view, data, size, layer, subpop, screenshotTimeout});
    parser.addPositionalArgument(
        QStringLiteral("MODEL"),
        QStringLiteral("Model file to open (default: the demo, %1); --view compare takes several").arg(demoModelPath()),
        QStringLiteral("[MODEL...]"));
  }
};

void setApplicationNames() {
  QCoreApplication::setOrganizationName(QStringLiteral("mumoe"));
  QCoreApplication::setApplicationName(QStringLiteral("mumoe-studio"));
  QCoreApplication::setApplicationVersion(QStringLiteral(MUMOE_VERSION));
}

// --help and --version print text only: they must work without a display, where creating the
// window's QApplication aborts.
bool asksForTextOnly(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    for (const char* flag : {"-h", "--help", "--help-all", "-?", "-v", "--version"})
      if (std::strcmp(argv[i], flag) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) then fails a write with EFBIG, which the core reports and
  // cleans up after, instead of killing the program with SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  // A temporary file of a write in progress is removed when a signal ends the program
  // (io/output_files.h); the next run sweeps those that SIGKILL left.
  mumoe::io::install_temporary_cleanup();
  if (asksForTextOnly(argc, argv)) {
    QCoreApplication app(argc, argv);
    setApplicationNames();
    StudioCommandLine commandLine;
    commandLine.parser.process(app);  // prints the help or version and exits
    return 0;
  }
  mumoe::io::tune_allocator_for_tensors();
  QApplication app(argc, argv);
  setApplicationNames();
  QApplication::setStyle(QStringLiteral("Fusion"));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/org.mumoe.Studio.svg")));
  QGuiApplication::setDesktopFileName(QStringLiteral("org.mumoe.Studio"));  // Wayland: the entry's icon and name

  StudioCommandLine commandLine;
  auto& parser = commandLine.parser;
  const auto& screenshot = commandLine.screenshot;
  const auto& view = commandLine.view;
  const auto& data = commandLine.data;
  const auto& size = commandLine.size;
  const auto& layer = commandLine.layer;
  const auto& screenshotTimeout = commandLine.screenshotTimeout;
  parser.process(app);

  const QString demo = demoModelPath();
  const QString model = parser.positionalArguments().value(0, demo);
  mumoe::ui::MainWindow window(demo);
  if (parser.isSet(data)) window.setDataSpec(parser.value(data));
  // The demo opens on its own data, not on whatever SPEC the last model used (a bare head's
  // feature file would not fit it).
  else if (parser.positionalArguments().isEmpty()) window.setDataSpec(QStringLiteral("fashion-mnist:test"));

  if (parser.isSet(screenshot)) {
    QTextStream err(stderr);
    const auto which = mumoe::ui::parseStudioView(parser.value(view));
    if (!which) {
      err << "mumoe-studio: unknown view '" << parser.value(view) << "' (model, gallery, ablation, bias, tokens, steering, compare)\n";
      return 1;
    }
    const QStringList wh = parser.value(size).split(QLatin1Char('x'));
    window.setErrorDialogsEnabled(false);
    window.resize(wh.value(0).toInt() > 0 ? wh.value(0).toInt() : 1400, wh.value(1).toInt() > 0 ? wh.value(1).toInt() : 860);
    window.show();
    // The view's data may take long to compute (the Compare page on ViT blocks: minutes per model).
    const int timeoutSeconds = parser.isSet(screenshotTimeout) ? parser.value(screenshotTimeout).toInt() : 180;
    if (timeoutSeconds <= 0) {
      err << "mumoe-studio: --screenshot-timeout takes a positive number of seconds\n";
      return 1;
    }
    mumoe::ui::ScreenshotDriver driver(&window, *which, parser.value(screenshot), timeoutSeconds * 1000);
    int code = 0;
    QObject::connect(&driver, &mumoe::ui::ScreenshotDriver::finished, &app, [&](int exitCode, const QString& message) {
      code = exitCode;
      err << "mumoe-studio: " << message << "\n";
      err.flush();
      app.exit(exitCode);
    });
    driver.setGallerySubpopulation(commandLine.parser.value(commandLine.subpop));
    driver.start(model, parser.positionalArguments(), parser.value(layer));
    app.exec();
    return code;
  }

  window.show();
  // Open after the event loop starts so an error dialog has a visible parent.
  QTimer::singleShot(0, &window, [&window, model, name = parser.value(layer)] { window.openModel(model, name); });
  return app.exec();
}
