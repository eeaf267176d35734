/*
 * The stand-in for the official solr:9.8 image's `solr-foreground` (CI has no image registry):
 * one Solr 9.8 node from the Maven Central jars, in the foreground, as the image runs it.
 *
 *   solr-foreground [-c]      -c: SolrCloud; ZooKeeper is ZK_HOST's, or embedded (on the
 *                             node's port + 1000, listening on SOLR_ZK_EMBEDDED_HOST)
 *
 * What it reads, as the image does: SOLR_HOME (/var/solr/data: its solr.xml written there when
 * missing, its lib/ loaded for every core), SOLR_PORT (8983), SOLR_HOST (the name other nodes
 * reach this one by), ZK_HOST, SOLR_ZK_EMBEDDED_HOST (127.0.0.1, the image's default).
 * Its solr.xml takes ZooKeeper's credentials and ACL providers from the system properties
 * zkCredentialsProvider, zkACLProvider and zkCredentialsInjector, as the distribution's does:
 * Solr reads them from solr.xml only (CloudConfig), so without these lines a node would ignore
 * the -D options in SOLR_OPTS and neither log in to ZooKeeper nor put ACLs on what it writes.
 * SOLR_HEAP and SOLR_OPTS are the JVM's (the `solr-foreground` script passes them); the
 * modules SOLR_MODULES names are on the class path already (all of solr/local/pom.xml's jars;
 * their folders exist for Solr to find). A node that fails to start exits.
 *
 * Solr's embedded Jetty (JettySolrRunner) listens on 127.0.0.1 only; the script forwards the
 * container's own address to it (socat), so the node is reached as the image's would be.
 */
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Properties;
import org.apache.solr.embedded.JettyConfig;
import org.apache.solr.embedded.JettySolrRunner;

public class SolrForeground {

  private static final String SOLR_XML =
      """
      <solr>
        <solrcloud>
          <str name="host">${host:}</str>
          <int name="hostPort">${hostPort:8983}</int>
          <str name="hostContext">${hostContext:solr}</str>
          <int name="zkClientTimeout">30000</int>
          <bool name="genericCoreNodeNames">true</bool>
          <str name="zkCredentialsProvider">${zkCredentialsProvider:org.apache.solr.common.cloud.DefaultZkCredentialsProvider}</str>
          <str name="zkACLProvider">${zkACLProvider:org.apache.solr.common.cloud.DefaultZkACLProvider}</str>
          <str name="zkCredentialsInjector">${zkCredentialsInjector:org.apache.solr.common.cloud.DefaultZkCredentialsInjector}</str>
        </solrcloud>
      </solr>
      """;

  public static void main(String[] args) {
    try {
      run(args);
    } catch (Throwable e) {  // Jetty's threads would keep a node that failed to start alive
      e.printStackTrace();
      System.exit(1);
    }
  }

  private static void run(String[] args) throws Exception {
    Path home = Path.of(env("SOLR_HOME", "/var/solr/data"));
    Files.createDirectories(home);
    if (!Files.exists(home.resolve("solr.xml"))) {
      Files.writeString(home.resolve("solr.xml"), SOLR_XML);
    }
    int port = Integer.parseInt(env("SOLR_PORT", "8983"));
    System.setProperty("hostPort", String.valueOf(port));
    System.setProperty("host", env("SOLR_HOST", InetAddress.getLocalHost().getHostName()));
    System.setProperty("solr.zk.embedded.host", env("SOLR_ZK_EMBEDDED_HOST", "127.0.0.1"));
    System.setProperty("solr.install.dir", env("SOLR_INSTALL_DIR", "/opt/solr"));
    Properties node = new Properties();
    String zkHost = env("ZK_HOST", "");
    if (!zkHost.isEmpty()) {
      node.setProperty("zkHost", zkHost);
    } else if (List.of(args).contains("-c")) {
      System.setProperty("zkRun", "");  // embedded ZooKeeper, as `solr start -c`
    }
    JettyConfig jetty = JettyConfig.builder().setPort(port).setContext("/solr").build();
    JettySolrRunner solr = new JettySolrRunner(home.toString(), node, jetty);
    solr.start();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      try {
        solr.stop();
      } catch (Exception e) {
        System.err.println("error while stopping Solr: " + e);
      }
    }, "solr-stop"));
    System.out.println("SOLR READY " + solr.getBaseUrl());
    System.out.flush();
    Thread.currentThread().join();
  }

  private static String env(String name, String otherwise) {
    String value = System.getenv(name);
    return value == null || value.isBlank() ? otherwise : value;
  }
}
